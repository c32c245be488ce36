//! Writing a benchmark's results beside its figure: the markdown table and the rows as JSON.

use std::path::Path;

use serde::Serialize;

/// Writes `<out>.md` (the table) and `<out>.json` (the rows, pretty), saying each path on
/// standard error; a path that cannot be written panics with its name.
pub fn write_table<T: Serialize + ?Sized>(out: &Path, markdown: &str, rows: &T) {
    let write = |extension: &str, contents: &str| {
        let path = out.with_extension(extension);
        std::fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        eprintln!("written: {}", path.display());
    };
    write("md", markdown);
    write(
        "json",
        &serde_json::to_string_pretty(rows).expect("rows serialise"),
    );
}
