//! Each crate's public surface, counted as the code review counts it: the names of the crate
//! root, its `memory` and its `planner` (a module's own name not counted, a hidden module's
//! names not at all, a macro and a function of one name twice). A small surface is a choice:
//! a name that joins one crate's count is weighed against the limit here.

use std::fs;

/// The most public names each library may have: the two Burn crates, then the core.
const LIMITS: [(&str, usize); 3] = [(".", 46), ("burn22", 46), ("core", 44)];

/// The top-level statements of `code` (lines at column 0, joined up to their `;` or `{`), so that
/// an item inside a module, a hidden one included, is not the file's.
fn statements(code: &str) -> Vec<String> {
    let (mut out, mut open) = (Vec::new(), None::<String>);
    for line in code.lines() {
        if let Some(mut statement) = open.take() {
            statement.push(' ');
            statement.push_str(line.trim());
            match line.trim_end().ends_with(';') {
                true => out.push(statement),
                false => open = Some(statement),
            }
        } else if line.starts_with("pub use ") && !line.trim_end().ends_with(';') {
            open = Some(line.to_string());
        } else if line.starts_with("pub ") {
            out.push(line.to_string());
        }
    }
    out
}

/// The names a `pub use` statement brings (`a::{b, c as d}` is `b` and `d`); a glob is the
/// list `glob` gives for its path.
fn used_names(statement: &str, glob: &dyn Fn(&str) -> Vec<String>) -> Vec<String> {
    let path = statement
        .trim_start_matches("pub use ")
        .trim_end_matches(';')
        .trim();
    if let Some(module) = path.strip_suffix("::*") {
        return glob(module);
    }
    let list = match path.split_once('{') {
        Some((_, list)) => list.trim_end_matches('}').to_string(),
        None => path.rsplit("::").next().unwrap().to_string(),
    };
    list.split(',')
        .map(|name| name.trim())
        .filter(|name| !name.is_empty())
        .map(|name| name.rsplit(" as ").next().unwrap().to_string())
        .map(|name| name.rsplit("::").next().unwrap().to_string())
        .collect()
}

/// The public names of one file (its top-level `pub` items and `pub use`s; no `pub mod`).
fn names_of(code: &str, glob: &dyn Fn(&str) -> Vec<String>) -> Vec<String> {
    let mut names = Vec::new();
    for statement in statements(code) {
        if statement.starts_with("pub use ") {
            names.extend(used_names(&statement, glob));
            continue;
        }
        let words: Vec<&str> = statement.split_whitespace().collect();
        let kinds = ["fn", "struct", "enum", "trait", "type", "const", "static"];
        if let Some(at) = words.iter().position(|word| kinds.contains(word)) {
            let name = words[at + 1];
            let name = name.split(['(', '<', ':', ' ', '{', '=']).next().unwrap();
            names.push(name.to_string());
        }
    }
    names
}

/// The names the core's hidden `engine::{memory, planner}` list for the Burn crates' globs (a
/// module among them not counted).
fn engine_list(module: &str) -> Vec<String> {
    let repository = crate::repository();
    let engine = fs::read_to_string(repository.join("core/src/engine.rs")).unwrap();
    let start = engine
        .find(&format!("pub mod {module} {{"))
        .unwrap_or_else(|| panic!("core/src/engine.rs has no `{module}` list"));
    let body = &engine[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find("\n}").unwrap()];
    // A module in the list (`timeline`) is a module, not a name.
    let core_module = fs::read_to_string(repository.join(format!("core/src/{module}/mod.rs")))
        .unwrap_or_default();
    body.split(';')
        .filter(|statement| statement.contains("pub use "))
        .flat_map(|statement| used_names(statement.trim(), &|_| Vec::new()))
        .filter(|name| !core_module.contains(&format!("pub mod {name};")))
        .collect()
}

/// A crate's counted names: its root's, its `memory`'s and its `planner`'s.
fn surface(folder: &str) -> Vec<String> {
    let src = crate::repository().join(folder).join("src");
    let read = |module: &str| {
        fs::read_to_string(src.join(format!("{module}.rs")))
            .or_else(|_| fs::read_to_string(src.join(module).join("mod.rs")))
            .unwrap_or_else(|_| panic!("{folder}/src has no `{module}`"))
    };
    let glob = |path: &str| match path.rsplit("::").next().unwrap() {
        "memory" | "planner" if path.contains("engine") => {
            engine_list(path.rsplit("::").next().unwrap())
        }
        other => panic!("{folder}: a glob re-export of `{other}`, which this count cannot read"),
    };
    let mut names = names_of(&read("lib"), &glob);
    names.extend(names_of(&read("memory"), &glob));
    names.extend(names_of(&read("planner"), &glob));
    names
}

#[test]
fn each_crate_keeps_its_public_names_within_its_limit() {
    let mut over = Vec::new();
    for (folder, limit) in LIMITS {
        let names = surface(folder);
        println!("{folder}: {} public names: {names:?}", names.len());
        if names.len() > limit {
            over.push(format!(
                "{folder}: {} names, at most {limit}: {names:?}",
                names.len()
            ));
        }
    }
    assert!(over.is_empty(), "{over:#?}");
}

/// The count reads what it claims: a flat list, a nested module's items left out, a glob
/// resolved, a renamed import by its new name.
#[test]
fn the_count_sees_what_it_counts() {
    let code = "pub use a::{B, c::D as E};\npub use f::G;\npub fn h() {}\npub mod m {\n    pub fn \
                hidden() {}\n}\npub(crate) fn i() {}\npub struct J<T>(T);\npub use k::*;\n";
    let names = names_of(code, &|_| vec!["L".to_string()]);
    assert_eq!(names, ["B", "E", "G", "h", "J", "L"]);
}
