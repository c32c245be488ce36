//! The signatures `#[checkpoint]` refuses fail to compile with a message that says what to write
//! instead (the `.stderr` files beside each case hold the expected errors). The cases need no
//! Burn: the attribute refuses them before it writes anything that names the library.

#[test]
fn refused_signatures_say_what_to_write_instead() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
