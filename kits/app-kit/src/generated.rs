//! A section of a page under `docs/` that a test measures and writes ([`keep`]): the page's claim
//! cannot drift from the code. Outside CI a test that finds the section out of date rewrites it
//! (commit the change); in CI (`CI` set) it fails instead, naming the section.

use std::fs;
use std::path::Path;

/// Keeps the section `key` of the page `page` (its text between the lines `<!-- key: begin -->`
/// and `<!-- key: end -->`) equal to `text`.
///
/// # Panics
///
/// Where the page or its markers are missing, or, in CI, where the section differs from `text`.
///
/// ```
/// let page = std::env::temp_dir().join(format!("generated-{}.md", std::process::id()));
/// std::fs::write(&page, "# A page\n<!-- matrix: begin -->\nold\n<!-- matrix: end -->\n").unwrap();
/// // SAFETY: no other thread of this doctest reads the environment.
/// unsafe { std::env::remove_var("CI") };
/// app_kit::generated::keep(&page, "matrix", "| new |\n");
/// let written = std::fs::read_to_string(&page).unwrap();
/// assert!(written.contains("begin -->\n| new |\n<!-- matrix: end"));
/// # std::fs::remove_file(page).unwrap();
/// ```
pub fn keep(page: &Path, key: &str, text: &str) {
    let written =
        fs::read_to_string(page).unwrap_or_else(|error| panic!("{}: {error}", page.display()));
    let (begin, end) = (
        format!("<!-- {key}: begin -->\n"),
        format!("<!-- {key}: end -->"),
    );
    let start = written
        .find(&begin)
        .unwrap_or_else(|| panic!("{} has no line `{}`", page.display(), begin.trim_end()))
        + begin.len();
    let stop = start
        + written[start..]
            .find(&end)
            .unwrap_or_else(|| panic!("{} has no line `{end}`", page.display()));
    if written[start..stop] == *text {
        return;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{}'s section `{key}` is not what the test measured: run the test outside CI (without \
         `CI` set), which rewrites it, and commit the page. Measured:\n{text}",
        page.display()
    );
    let rewritten = format!("{}{text}{}", &written[..start], &written[stop..]);
    fs::write(page, rewritten).unwrap_or_else(|error| panic!("{}: {error}", page.display()));
    println!("{}: section `{key}` rewritten", page.display());
}
