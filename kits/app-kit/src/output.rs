//! Writing a benchmark's results beside its figure: the markdown table and the rows as JSON; and
//! checking, before a run, that the files and folders it will write can be written
//! ([`writable_file`], [`writable_dir`]).

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

/// Checks, before a run, that `path` (the value of the flag `flag`) can be written as a file: not
/// a directory, its directory there, a file creatable in it (a probe, removed at once). The
/// message names the flag and says what is wrong.
///
/// ```
/// use app_kit::output::writable_file;
///
/// let dir = std::env::temp_dir();
/// assert!(writable_file("--json", &dir.join("rows.json")).is_ok());
/// let refused = writable_file("--json", &dir).unwrap_err();
/// assert!(refused.contains("is a directory"), "{refused}");
/// let missing = writable_file("--json", &dir.join("no-such-folder/rows.json")).unwrap_err();
/// assert!(missing.contains("does not exist"), "{missing}");
/// ```
pub fn writable_file(flag: &str, path: &Path) -> Result<(), String> {
    let shown = path.display();
    if path.is_dir() {
        return Err(format!(
            "{flag} {shown} is a directory: give a file name in it"
        ));
    }
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(format!(
            "{flag} {shown}: the directory {} does not exist",
            parent.display()
        ));
    }
    probe(flag, path, parent)
}

/// Checks, before a run, that `dir` (the value of the flag `flag`) is a directory the run can
/// write in: created where it is missing, a file creatable in it (a probe, removed at once).
///
/// ```
/// use app_kit::output::writable_dir;
///
/// let dir = std::env::temp_dir().join(format!("writable-dir-{}", std::process::id()));
/// assert!(writable_dir("--artifact-dir", &dir).is_ok());
/// assert!(dir.is_dir());
/// # std::fs::remove_dir(&dir).unwrap();
/// ```
pub fn writable_dir(flag: &str, dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    if dir.exists() && !dir.is_dir() {
        return Err(format!("{flag} {shown}: not a directory"));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{flag} {shown}: cannot create the directory ({e})"))?;
    probe(flag, dir, dir)
}

/// Creates and removes a probe file in `dir`, for `flag`'s value `shown`.
fn probe(flag: &str, shown: &Path, dir: &Path) -> Result<(), String> {
    let probe = dir.join(format!(".write-probe-{}", std::process::id()));
    std::fs::File::create(&probe).map_err(|e| {
        format!(
            "{flag} {}: cannot write in {} ({e})",
            shown.display(),
            dir.display()
        )
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
