//! The Markdown and the doc comments against the code: every Rust block in the docs is compiled
//! or says why not, the docs give reasons rather than issue numbers, and no name the crates
//! removed is still written anywhere a user reads (docs, doc comments, strings such as the op
//! notes `coverage::ops()` returns), every link finds its file and heading, and every page of
//! the guide is in its index.

use std::fs;
use std::path::{Path, PathBuf};

/// The repository's files whose names end with `ending` (README.md, docs/, each crate's),
/// `target/` and hidden folders left out.
fn files_ending(dir: &Path, ending: &str, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" {
                files_ending(&path, ending, out);
            }
        } else if name.ends_with(ending) {
            out.push(path);
        }
    }
}

/// Every Markdown file of the repository: its path below the repository, and its text.
fn markdown() -> Vec<(String, String)> {
    let repository = crate::repository();
    let mut files = Vec::new();
    files_ending(repository, ".md", &mut files);
    files
        .into_iter()
        .map(|file| {
            let text = fs::read_to_string(&file).unwrap();
            let path = file.strip_prefix(repository).unwrap().display().to_string();
            (path, text)
        })
        .collect()
}

/// Whether a crate runs `readme` as a doctest (`#[doc = include_str!("../README.md")]` in its
/// folder's `src/lib.rs`, or the root crate's `include_str!("../burn21/README.md")`): a README a
/// package ships, whose Rust blocks run.
fn runs_as_doctest(readme: &str) -> bool {
    let repository = crate::repository();
    let Some(folder) = readme.strip_suffix("README.md") else {
        return false;
    };
    let includes = |lib: &str, path: &str| {
        fs::read_to_string(repository.join(lib))
            .is_ok_and(|lib| lib.contains(&format!("#[doc = include_str!(\"../{path}\")]")))
    };
    includes(&format!("{folder}src/lib.rs"), "README.md") || includes("src/lib.rs", readme)
}

/// Each library package's README (its manifest's `readme`, what crates.io shows): written for
/// it, run as its doctest, and with no relative link, which would break outside the repository.
#[test]
fn each_package_ships_a_readme_of_its_own_that_runs_and_links_nowhere_relative() {
    let repository = crate::repository();
    let mut wrong = Vec::new();
    for folder in [".", "core", "burn22", "parallel"] {
        let manifest = fs::read_to_string(repository.join(folder).join("Cargo.toml")).unwrap();
        let readme = manifest
            .lines()
            .find_map(|line| line.strip_prefix("readme = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{folder}/Cargo.toml names no readme"));
        let path = Path::new(folder).join(readme);
        let path = path
            .strip_prefix(".")
            .unwrap_or(&path)
            .display()
            .to_string();
        if path == "README.md" {
            wrong.push(format!(
                "{folder}: ships the repository's front page as its README"
            ));
        }
        if !runs_as_doctest(&path) {
            wrong.push(format!("{path}: not run as its crate's doctest"));
        }
        let text = fs::read_to_string(repository.join(&path)).unwrap();
        for (at, line) in text.lines().enumerate() {
            let relative = line.split("](").skip(1).any(|link| {
                !link.starts_with("http") && !link.starts_with('#') && !link.starts_with("mailto")
            });
            if relative {
                wrong.push(format!("{path}:{}: a relative link: {line}", at + 1));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The Rust blocks of a Markdown text: each one's fence line (0-based), fence and body.
fn rust_blocks(text: &str) -> Vec<(usize, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut open: Option<(usize, &str)> = None;
    for (at, line) in lines.iter().enumerate() {
        if !line.starts_with("```") {
            continue;
        }
        match open.take() {
            Some((start, fence)) if fence.starts_with("rust") => {
                let body = lines[start + 1..at].join("\n");
                blocks.push((start, fence.to_string(), body));
            }
            Some(_) => {}
            None => open = Some((at, line.trim_start_matches('`'))),
        }
    }
    blocks
}

#[test]
fn every_rust_block_of_the_docs_is_compiled_or_says_why_not() {
    // A crate's README (the one its package ships) runs as its doctest. Every other Rust block is
    // a sketch, marked `rust,ignore`, with the reason in the text just above it ("Not compiled
    // (...)"); one that says it is "the same block as `FILE`'s" must be, word for word, so that
    // it compiles there. A block that should run belongs in a rustdoc example, where it does.
    let files = markdown();
    let mut wrong = Vec::new();
    for (file, text) in &files {
        let lines: Vec<&str> = text.lines().collect();
        let doctest = runs_as_doctest(file);
        for (at, fence, body) in rust_blocks(text) {
            let said = lines[at.saturating_sub(3)..at]
                .iter()
                .find(|line| line.contains("Not compiled"));
            if fence != "rust,ignore" {
                if !doctest || fence.contains("ignore") {
                    wrong.push(format!(
                        "{file}:{}: a Rust block neither compiled (a crate's README run as its \
                         doctest) nor `rust,ignore` after a \"Not compiled (why)\" line",
                        at + 1
                    ));
                }
                continue;
            }
            let Some(said) = said else {
                wrong.push(format!(
                    "{file}:{}: a `rust,ignore` block without a \"Not compiled (why)\" line",
                    at + 1
                ));
                continue;
            };
            let Some(rest) = said.split("the same block as `").nth(1) else {
                continue;
            };
            let other = rest.split('`').next().unwrap_or_default();
            let compiled = files.iter().any(|(path, text)| {
                path == other
                    && runs_as_doctest(path)
                    && rust_blocks(text)
                        .iter()
                        .any(|(_, fence, there)| fence == "rust" && *there == body)
            });
            if !compiled {
                wrong.push(format!(
                    "{file}:{}: not the same block as a compiled one of `{other}`",
                    at + 1
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Whether `line` names an issue by its number ("issue 45", "issues #12").
fn numbers_an_issue(line: &str) -> bool {
    let lower = line.to_lowercase();
    lower.match_indices("issue").any(|(index, _)| {
        let rest = lower[index + "issue".len()..].trim_start_matches('s');
        let rest = rest.trim_start_matches(' ').trim_start_matches('#');
        rest.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// The docs and the code's comments give reasons, not issue numbers: their reader was not
/// there, and "issue 45" says nothing a sentence could not (a reference to another project's
/// issue, `burn #4549`, names its project).
#[test]
fn the_docs_say_reasons_not_issue_numbers() {
    let mut wrong = Vec::new();
    for (file, text) in markdown() {
        for (at, line) in text.lines().enumerate() {
            if numbers_an_issue(line) {
                wrong.push(format!("{file}:{}: {line}", at + 1));
            }
        }
    }
    let repository = crate::repository();
    let mut sources = Vec::new();
    files_ending(repository, ".rs", &mut sources);
    // This file writes one to say what the check refuses.
    sources.retain(|file| !file.ends_with("tidy/src/docs.rs"));
    for file in sources {
        let text = fs::read_to_string(&file).unwrap();
        for (at, line) in text.lines().enumerate() {
            if read_parts(line).into_iter().any(numbers_an_issue) {
                wrong.push(format!("{}:{}: {line}", file.display(), at + 1));
            }
        }
    }
    assert!(wrong.is_empty(), "say why instead:\n{}", wrong.join("\n"));
}

/// Names in the table's "removed" column that are still the name of something live, with
/// where: only their call written bare (`enter()`, not `.enter()`) is the removed item.
const LIVE: [(&str, &str); 6] = [
    ("enter", "Region::enter"),
    (
        "current_region",
        "burn_checkpoint_core::engine::recording's hook",
    ),
    (
        "Meter::Device",
        "the variant of core's Meter, made by Meter::device",
    ),
    ("verify_recomputes", "a field of Settings"),
    ("offload_in_flight_limit", "a field of Settings"),
    ("Treatment", "planner::Treatment"),
];

/// The names docs/burn-0.22-from-0.21.md's "What replaced what" table says were removed: the
/// backticked spans of its first column, arguments dropped, `a::{b, c}` spelled `a::b`, `a::c`.
fn removed_names(markdown: &str) -> Vec<String> {
    let table = markdown
        .split("### What replaced what")
        .nth(1)
        .expect("docs/burn-0.22-from-0.21.md has a \"What replaced what\" section");
    let mut names = Vec::new();
    for row in table
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2)
    {
        let removed = row.split('|').nth(1).expect("a table row");
        for span in removed.split('`').skip(1).step_by(2) {
            let span = span.split('(').next().unwrap().trim();
            match span.split_once("::{") {
                Some((prefix, group)) => {
                    for item in group.trim_end_matches('}').split(',') {
                        names.push(format!("{prefix}::{}", item.trim()));
                    }
                }
                None => names.push(span.to_string()),
            }
        }
    }
    names
}

fn ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `text` writes `name` where it is the removed item: as a whole word, not reached
/// through another path (`burn_checkpoint_core::memory::mib` is live where `memory::mib` of a
/// Burn crate is not), and for a live name only as a bare call.
fn writes(text: &str, name: &str) -> bool {
    let live = LIVE.iter().any(|(live, _)| *live == name);
    text.match_indices(name).any(|(at, _)| {
        let before = &text[..at];
        let after = &text[at + name.len()..];
        let whole = !before.ends_with(ident) && !after.starts_with(ident);
        let through = before.ends_with("::") || before.ends_with('.');
        let bare_call = after.starts_with('(');
        whole && !through && (!live || bare_call)
    })
}

/// What a user reads of a Rust file's line: its comment and its string literals.
fn read_parts(line: &str) -> Vec<&str> {
    let (code, comment) = match line.find("//") {
        Some(at) => (&line[..at], Some(&line[at..])),
        None => (line, None),
    };
    let mut parts: Vec<&str> = code.split('"').skip(1).step_by(2).collect();
    parts.extend(comment);
    parts
}

#[test]
fn no_removed_name_is_written_where_users_read() {
    let repository = crate::repository();
    let table = repository.join("docs/burn-0.22-from-0.21.md");
    let names = removed_names(&fs::read_to_string(&table).unwrap());
    assert!(names.len() > 30, "the table was read: {names:?}");
    let mut files = Vec::new();
    files_ending(repository, ".md", &mut files);
    files_ending(repository, ".rs", &mut files);
    let mut found = Vec::new();
    // This file names them to test the check.
    files.retain(|file| !file.ends_with("tidy/src/docs.rs"));
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let rust = file.extension().is_some_and(|e| e == "rs");
        let mut in_table = false;
        for (at, line) in text.lines().enumerate() {
            if file == table {
                // The table itself, and the text up to the next heading, name them on purpose.
                if line.starts_with("### What replaced what") {
                    in_table = true;
                } else if line.starts_with('#') {
                    in_table = false;
                }
                if in_table {
                    continue;
                }
            }
            let parts = if rust { read_parts(line) } else { vec![line] };
            for name in &names {
                if parts.iter().any(|part| writes(part, name)) {
                    found.push(format!(
                        "{}:{}: `{name}`: {}",
                        file.strip_prefix(repository).unwrap().display(),
                        at + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "removed names (docs/burn-0.22-from-0.21.md, \"What replaced what\") still written:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_drift_check_sees_what_it_looks_for() {
    let names = removed_names(
        "### What replaced what\n\n| removed | write instead |\n|---|---|\n\
         | `checkpoint_named(n, f)` (0.21) | x |\n| `coverage::{reset, device_reads}` | y |\n\
         | `enter()` | z |\n",
    );
    assert_eq!(
        names,
        [
            "checkpoint_named",
            "coverage::reset",
            "coverage::device_reads",
            "enter"
        ]
    );
    assert!(writes("see `checkpoint_named`", "checkpoint_named"));
    assert!(!writes("checkpoint_named_twice", "checkpoint_named"));
    assert!(writes(
        "counted in coverage::device_reads",
        "coverage::device_reads"
    ));
    assert!(!writes("burn_checkpoint_core::memory::mib", "memory::mib"));
    assert!(writes("call `enter()`", "enter"));
    assert!(!writes("Region::new().enter()", "enter"));
    assert!(!writes("the guard enter returns", "enter"));
    assert_eq!(read_parts(r#"f("a b"); // c"#), ["a b", "// c"]);
}

/// A heading's anchor as GitHub makes it: lowercased, every character but letters, digits,
/// spaces, `-` and `_` dropped, spaces made `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (a repeated one gets `-1`, `-2`, … as on GitHub),
/// code blocks left out.
fn anchors(markdown: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut in_block = false;
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
        }
        if in_block || !line.starts_with('#') {
            continue;
        }
        let base = anchor(line.trim_start_matches('#'));
        let repeats = found
            .iter()
            .filter(|a| {
                **a == base
                    || a.strip_prefix(&format!("{base}-"))
                        .is_some_and(|n| n.parse::<usize>().is_ok())
            })
            .count();
        found.push(match repeats {
            0 => base,
            n => format!("{base}-{n}"),
        });
    }
    found
}

/// The targets of a Markdown file's links (`](target)`), outside code blocks and code spans.
fn link_targets(markdown: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    let mut in_block = false;
    for (at, line) in markdown.lines().enumerate() {
        if line.starts_with("```") {
            in_block = !in_block;
        }
        if in_block {
            continue;
        }
        // Code spans name links as text.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        for (start, _) in prose.match_indices("](") {
            let rest = &prose[start + 2..];
            if let Some(end) = rest.find(')') {
                targets.push((at + 1, rest[..end].to_string()));
            }
        }
    }
    targets
}

/// Every link of every Markdown file to a file of the repository finds it, and its `#anchor`
/// finds a heading there (a heading renamed breaks the links to it).
#[test]
fn every_link_finds_its_file_and_heading() {
    let repository = crate::repository();
    let files = markdown();
    let mut broken = Vec::new();
    for (file, text) in &files {
        let dir = Path::new(file).parent().unwrap_or(Path::new(""));
        for (line, target) in link_targets(text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            let linked = if path.is_empty() {
                file.clone()
            } else {
                dir.join(path).display().to_string()
            };
            let on_disk = repository.join(&linked);
            if !on_disk.exists() {
                broken.push(format!("{file}:{line}: `{target}`: no file {linked}"));
                continue;
            }
            let Some(fragment) = fragment else {
                continue;
            };
            let Ok(text) = fs::read_to_string(&on_disk) else {
                continue;
            };
            if !anchors(&text).iter().any(|a| a == fragment) {
                broken.push(format!(
                    "{file}:{line}: `{target}`: no heading #{fragment} in {linked}"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

#[test]
fn the_link_check_sees_what_it_looks_for() {
    let page = "# A page\n\n## When an allocation fails\n\n## Twice\n\n### Twice\n\n\
                ```\n# not a heading\n```\n## `Cut::Block` (the GPT's)\n";
    assert_eq!(
        anchors(page),
        [
            "a-page",
            "when-an-allocation-fails",
            "twice",
            "twice-1",
            "cutblock-the-gpts"
        ]
    );
    assert_eq!(
        link_targets("see [gpu](gpu.md#when-an-allocation-fails), `[x](y.md)` and [z](#twice)"),
        [
            (1, "gpu.md#when-an-allocation-fails".to_string()),
            (1, "#twice".to_string())
        ]
    );
}

/// The widest comment line of the code: 100 columns, as rustfmt's code.
const COMMENT_WIDTH: usize = 100;

/// Every comment line of the repository's Rust files (`//`, doc comments, doctests in them)
/// fits in [`COMMENT_WIDTH`] columns, as rustfmt keeps the code: rustfmt wraps neither.
#[test]
fn comment_lines_fit_in_100_columns() {
    let repository = crate::repository();
    let mut files = Vec::new();
    files_ending(repository, ".rs", &mut files);
    let mut wide = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for (at, line) in text.lines().enumerate() {
            let columns = line.chars().count();
            if line.trim_start().starts_with("//") && columns > COMMENT_WIDTH {
                wide.push(format!(
                    "{}:{}: {columns} columns",
                    file.strip_prefix(repository).unwrap().display(),
                    at + 1
                ));
            }
        }
    }
    assert!(
        wide.is_empty(),
        "comment lines over {COMMENT_WIDTH} columns (wrap them): {wide:#?}"
    );
}

/// Every page of the guide (each Markdown file directly under docs/) is in docs/README.md's
/// index: a page written and not indexed is one no reader finds.
#[test]
fn every_page_of_the_guide_is_in_its_index() {
    let docs = crate::repository().join("docs");
    let index = fs::read_to_string(docs.join("README.md")).unwrap();
    let linked: Vec<String> = link_targets(&index)
        .into_iter()
        .map(|(_, target)| target.split('#').next().unwrap_or_default().to_string())
        .collect();
    let mut missing = Vec::new();
    for entry in fs::read_dir(&docs).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".md") && name != "README.md" && !linked.contains(&name) {
            missing.push(name);
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "pages docs/README.md does not index: {missing:?}"
    );
}
