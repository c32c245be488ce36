//! The signatures `#[checkpoint]` refuses and the types `#[derive(RegionTensors)]` refuses fail to
//! compile with a message that says what to write instead (the `.stderr` files beside each case
//! hold the expected errors).

#[test]
fn refused_signatures_and_types_say_what_to_write_instead() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
