//! The library's modules stand bottom-up: each imports only the modules `src/lib.rs` declares
//! before it (docs/architecture.md has the table). Read from the sources, so that an import that
//! runs back up fails here, naming the file.

use std::fs;
use std::path::{Path, PathBuf};

/// The modules `lib.rs` declares, in order.
fn declared_order(lib: &str) -> Vec<String> {
    lib.lines()
        .map(str::trim)
        .filter_map(|line| {
            let line = line.strip_prefix("pub ").unwrap_or(line);
            let name = line.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.to_string())
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crate modules `code` refers to as `crate::name`, comments left out.
fn references(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        for (at, _) in line.match_indices("crate::") {
            // `burn_checkpoint_core::` and the like are other crates.
            if line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let name: String = line[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.push(name);
        }
    }
    found
}

#[test]
fn no_import_runs_back_up() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let order = declared_order(&fs::read_to_string(src.join("lib.rs")).unwrap());
    assert!(order.len() > 10, "lib.rs declares its modules: {order:?}");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut upward = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        let module = relative
            .iter()
            .next()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        let Some(level) = order.iter().position(|m| *m == module) else {
            continue; // lib.rs itself
        };
        for name in references(&fs::read_to_string(&file).unwrap()) {
            if let Some(used) = order.iter().position(|m| *m == name)
                && used > level
            {
                upward.push(format!("{} uses crate::{name}", relative.display()));
            }
        }
    }
    assert!(upward.is_empty(), "imports that run back up: {upward:#?}");
}
