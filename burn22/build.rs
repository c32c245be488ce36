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
    let version = burn_pin(&text).unwrap_or_else(|| {
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

/// Burn's exact version from the manifest: the repository's `burn = { version = "=X.Y.Z", … }`
/// line, or the `[dependencies.burn]` table `cargo package` writes into the packaged manifest.
fn burn_pin(manifest: &str) -> Option<String> {
    let exact = |rest: &str| {
        let start = rest.find("version = \"=")? + "version = \"=".len();
        let end = start + rest[start..].find('"')?;
        Some(rest[start..end].to_string())
    };
    let mut in_burn_table = false;
    for line in manifest.lines().map(str::trim_start) {
        if line.starts_with('[') {
            in_burn_table = line.trim_end() == "[dependencies.burn]";
        } else if let Some(rest) = line.strip_prefix("burn = ") {
            return exact(rest);
        } else if in_burn_table && line.starts_with("version = ") {
            return exact(line);
        }
    }
    None
}
