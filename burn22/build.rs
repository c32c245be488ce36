//! Which Burn the crate is built on, from the exact pin in its manifest: Burn 0.22 ends every
//! backward, a region's nested one included, with the data-parallel sync (the `cfg` below turns
//! on the refusal of regions over distributed parameters); Burn 0.23 does not. A version change
//! (`scripts/burn23`) is then all that moving to 0.23 takes.

use std::{env, fs, path::Path};

fn main() {
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rustc-check-cfg=cfg(burn_backward_always_syncs)");
    let manifest =
        Path::new(&env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join("Cargo.toml");
    let text = fs::read_to_string(&manifest).expect("the crate's manifest");
    let version = text
        .lines()
        .find_map(|line| {
            let rest = line.trim_start().strip_prefix("burn = ")?;
            let start = rest.find("version = \"=")? + "version = \"=".len();
            let end = start + rest[start..].find('"')?;
            Some(rest[start..end].to_string())
        })
        .unwrap_or_else(|| {
            panic!(
                "{}: no exact `burn = {{ version = \"=X.Y.Z\", … }}` pin; the crate reads Burn's \
                 version from it",
                manifest.display()
            )
        });
    if version.starts_with("0.22.") {
        println!("cargo:rustc-cfg=burn_backward_always_syncs");
    }
}
