//! Both libraries' modules stand bottom-up: each imports only the modules its `lib.rs` declares
//! before it, and nothing `lib.rs` defines itself (docs/architecture.md has the tables); every
//! crate's path dependencies point up docs/architecture.md's folder table. Read from the sources
//! and manifests, so that an import that runs back up fails here, naming the file.

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

#[test]
fn no_import_runs_back_up() {
    // Every library, the same rule: the crate for Burn 0.21, the one for Burn 0.22, and what
    // they share.
    for crate_src in ["src", "burn22/src", "core/src"] {
        imports_stay_below(&crate::repository().join(crate_src));
    }
}

/// The items `lib` defines itself (not modules, not re-exports): `const`, `static`, `fn`, types,
/// traits and inline modules. The crate root stands above every module it declares, so a module
/// that names one of them runs back up.
fn defined_in_lib(lib: &str) -> Vec<String> {
    const KINDS: [&str; 8] = [
        "const ", "static ", "fn ", "struct ", "enum ", "trait ", "type ", "mod ",
    ];
    lib.lines()
        .filter(|line| !line.starts_with(' ') && !line.starts_with("//"))
        .filter_map(|line| {
            let line = line.strip_prefix("pub ").unwrap_or(line);
            let rest = KINDS.iter().find_map(|kind| line.strip_prefix(kind))?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // `mod name;` is a declared module, in the order; `mod name {` is inline.
            let declared = rest[name.len()..].starts_with(';');
            (!name.is_empty() && !declared).then_some(name)
        })
        .collect()
}

/// Fails on any file under `src` that uses a module its `lib.rs` declares after its own, or an
/// item `lib.rs` defines itself. Imports are read as the folder checks read them
/// ([`sibling_imports`]): through re-exports too, so that `use crate::Name` of a name `lib.rs`
/// re-exports counts as an import of the module that defines it.
fn imports_stay_below(src: &Path) {
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    let order = declared_order(&lib);
    let root_items = defined_in_lib(&lib);
    assert!(order.len() > 5, "lib.rs declares its modules: {order:?}");
    let level = |module: &str| order.iter().position(|m| m == module);
    let mut upward = Vec::new();
    for import in sibling_imports(src) {
        if !import.folder.is_empty() {
            continue;
        }
        if let (Some(from), Some(to)) = (level(&import.from), level(&import.to))
            && to > from
        {
            upward.push(format!(
                "{}: `{}` is declared after `{}`",
                import.because, import.to, import.from
            ));
        }
    }
    let mut files = Vec::new();
    rust_files(src, &mut files);
    for file in files {
        let module = module_path(src, &file);
        if module.is_empty() {
            continue; // lib.rs itself
        }
        let code = without_comments(&fs::read_to_string(&file).unwrap());
        for path in named_paths(&code, &module) {
            if path.len() == 1 && root_items.contains(&path[0]) {
                upward.push(format!(
                    "{} uses crate::{}, which lib.rs defines (the root stands above its \
                     modules: define it in a module and re-export it)",
                    file.strip_prefix(src).unwrap().display(),
                    path[0]
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that run back up in {}: {upward:#?}",
        src.display()
    );
}

/// Every crate of the repository: the folders holding a `lib.rs` or a `main.rs`.
fn crate_roots() -> Vec<PathBuf> {
    let repository = crate::repository();
    let mut roots = Vec::new();
    let mut pending = vec![repository.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if !path.is_dir() || name.starts_with('.') || name == "target" {
                continue;
            }
            if name == "src" && (path.join("lib.rs").exists() || path.join("main.rs").exists()) {
                roots.push(path);
            } else {
                pending.push(path);
            }
        }
    }
    roots.sort();
    roots
}

/// A file's module path below its crate root (`recompute/mod.rs` is `[recompute]`, `lib.rs`
/// is `[]`).
fn module_path(root: &Path, file: &Path) -> Vec<String> {
    let mut path: Vec<String> = file
        .strip_prefix(root)
        .unwrap()
        .iter()
        .map(|part| part.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        path.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        path.pop();
    }
    path
}

/// The code of `text` with its comments (line comments, doc comments included) and its unit
/// tests left out: a `#[cfg(test)] mod` (last in a file, by custom) may use the whole crate, as
/// an integration test does.
fn without_comments(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            // `//` inside a string ("http://") is rare enough in this code base to ignore.
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The words a path from the crate's own modules starts with.
const PATH_STARTS: [&str; 3] = ["crate::", "super::", "self::"];

/// Whether `c` can be part of an identifier.
fn ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `word` starts at `at` in `chars`, not inside a longer identifier.
fn word_at(chars: &[char], at: usize, word: &str) -> bool {
    let end = at + word.chars().count();
    end <= chars.len()
        && chars[at..end].iter().copied().eq(word.chars())
        && (at == 0 || !ident(chars[at - 1]))
}

/// The paths `code` names from `crate::`, `super::` or `self::`, use groups expanded, as
/// absolute module paths for a file at `module`.
fn named_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let prefix = PATH_STARTS
            .into_iter()
            .find(|word| word_at(&chars, at, word));
        let Some(prefix) = prefix else {
            at += 1;
            continue;
        };
        // The module the path starts from.
        let mut base: Vec<String> = match prefix {
            "crate::" => Vec::new(),
            // A file `a.rs` is module `a`, whose `super` is its folder; `a/mod.rs` too.
            "super::" => module[..module.len().saturating_sub(1)].to_vec(),
            _ => module.to_vec(),
        };
        at += prefix.len();
        while word_at(&chars, at, "super::") {
            base.pop();
            at += "super::".len();
        }
        at = read_tree(&chars, at, base, &mut found);
    }
    found
}

/// Reads one use tree at `at` (`a::b`, `a::{b, c::d}`, `*`) below `base`; returns where it ends.
fn read_tree(
    chars: &[char],
    mut at: usize,
    mut base: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        while at < chars.len() && chars[at].is_whitespace() {
            at += 1;
        }
        if at < chars.len() && chars[at] == '{' {
            at += 1;
            loop {
                at = read_tree(chars, at, base.clone(), out);
                while at < chars.len() && (chars[at].is_whitespace() || chars[at] == ',') {
                    at += 1;
                }
                if at >= chars.len() || chars[at] == '}' {
                    return at + 1;
                }
            }
        }
        let start = at;
        while at < chars.len() && ident(chars[at]) {
            at += 1;
        }
        if at == start {
            out.push(base);
            return at;
        }
        base.push(chars[start..at].iter().collect());
        if chars[at..].starts_with(&[':', ':']) {
            at += 2;
        } else {
            out.push(base);
            return at;
        }
    }
}

/// The modules of a crate: every module path that is a file or a folder.
fn modules_of(root: &Path) -> std::collections::BTreeSet<Vec<String>> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut modules = std::collections::BTreeSet::new();
    for file in &files {
        let path = module_path(root, file);
        for end in 0..=path.len() {
            modules.insert(path[..end].to_vec());
        }
    }
    modules
}

/// The paths the `use` items of `code` name, for a file at `module`: `crate::`, `super::`,
/// `self::` and relative (`use step::Step;` in a `mod.rs` names its child `step`).
fn use_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        if !word_at(&chars, at, "use ") {
            at += 1;
            continue;
        }
        at += "use ".len();
        // `crate::`, `super::` and `self::` paths are named_paths' to read.
        if !PATH_STARTS.iter().any(|prefix| word_at(&chars, at, prefix)) {
            at = read_tree(&chars, at, module.to_vec(), &mut found);
        }
    }
    found
}

/// What the `use` items of every `mod.rs`, `lib.rs` and `main.rs` re-export: the item's path as
/// the folder's (`recompute::RegionOp`) → the module it comes from (`recompute::region_op`), so
/// that an import through a folder's re-export counts as one of the module it names.
fn reexports(
    root: &Path,
    modules: &std::collections::BTreeSet<Vec<String>>,
) -> std::collections::BTreeMap<Vec<String>, Vec<String>> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut map = std::collections::BTreeMap::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy();
        if !matches!(&*name, "mod.rs" | "lib.rs" | "main.rs") {
            continue;
        }
        let module = module_path(root, &file);
        let code = without_comments(&fs::read_to_string(&file).unwrap());
        let mut paths = use_paths(&code, &module);
        paths.extend(named_paths(&code, &module));
        for path in paths {
            let Some(leaf) = path.last() else { continue };
            let key: Vec<String> = module.iter().chain([leaf]).cloned().collect();
            let mut from = path.clone();
            while !from.is_empty() && !modules.contains(&from) {
                from.pop();
            }
            if !modules.contains(&key) && from != module && !from.is_empty() {
                map.insert(key, from);
            }
        }
    }
    map
}

/// `path` with the re-exports it goes through followed to the modules that define the items.
fn resolve(
    mut path: Vec<String>,
    reexports: &std::collections::BTreeMap<Vec<String>, Vec<String>>,
) -> Vec<String> {
    for _ in 0..8 {
        let Some(k) = (1..=path.len())
            .rev()
            .find(|&k| reexports.contains_key(&path[..k]))
        else {
            break;
        };
        let mut target = reexports[&path[..k]].clone();
        target.extend_from_slice(&path[k..]);
        path = target;
    }
    path
}

/// One import between two modules of a folder: the folder, the two modules, and the file and
/// path that make it.
#[derive(Clone, Debug)]
struct Import {
    folder: Vec<String>,
    from: String,
    to: String,
    because: String,
}

/// The imports between sibling modules, for every folder of the crate at `root`.
fn sibling_imports(root: &Path) -> Vec<Import> {
    let modules = modules_of(root);
    let reexports = reexports(root, &modules);
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut imports = Vec::new();
    for file in files {
        let module = module_path(root, &file);
        let code = without_comments(&fs::read_to_string(&file).unwrap());
        for path in named_paths(&code, &module) {
            let mut path = resolve(path, &reexports);
            // The module the path names: its longest prefix that is one (items are dropped).
            while !path.is_empty() && !modules.contains(&path) {
                path.pop();
            }
            let common = module.iter().zip(&path).take_while(|(a, b)| a == b).count();
            // A path to an ancestor (an item of a `mod.rs`) or into the file's own module is
            // no import between siblings.
            if common < module.len() && common < path.len() {
                imports.push(Import {
                    folder: module[..common].to_vec(),
                    from: module[common].clone(),
                    to: path[common].clone(),
                    because: format!(
                        "{} names {}",
                        file.strip_prefix(root).unwrap().display(),
                        path.join("::")
                    ),
                });
            }
        }
    }
    imports
}

/// The circles among the sibling modules of each folder, each written as the imports that
/// close it.
fn circles(imports: &[Import]) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut graphs: BTreeMap<&[String], BTreeMap<&str, BTreeMap<&str, &str>>> = BTreeMap::new();
    for import in imports {
        graphs
            .entry(&import.folder)
            .or_default()
            .entry(&import.from)
            .or_default()
            .entry(&import.to)
            .or_insert(&import.because);
    }
    let mut found = Vec::new();
    for (folder, graph) in &graphs {
        let mut reported: BTreeSet<BTreeSet<&str>> = BTreeSet::new();
        for &start in graph.keys() {
            // A shortest way back to `start`, breadth first, names the smallest circle.
            let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
            let mut frontier = vec![start];
            let mut closed = None;
            'search: while !frontier.is_empty() {
                let mut next = Vec::new();
                for &node in &frontier {
                    for &to in graph
                        .get(node)
                        .map(|m| m.keys().copied().collect::<Vec<_>>())
                        .unwrap_or_default()
                        .iter()
                    {
                        if to == start {
                            closed = Some(node);
                            break 'search;
                        }
                        if !came_from.contains_key(to) {
                            came_from.insert(to, node);
                            next.push(to);
                        }
                    }
                }
                frontier = next;
            }
            let Some(mut last) = closed else { continue };
            let mut ring = vec![start];
            let mut chain = vec![last];
            while last != start {
                last = came_from.get(last).copied().unwrap_or(start);
                if last != start {
                    chain.push(last);
                }
            }
            chain.reverse();
            ring.extend(chain);
            if !reported.insert(ring.iter().copied().collect()) {
                continue;
            }
            let steps: Vec<&str> = ring
                .iter()
                .zip(ring.iter().skip(1).chain([&start]))
                .map(|(from, to)| graph[from][to])
                .collect();
            found.push(format!("in {}/: {}", folder.join("/"), steps.join("; ")));
        }
    }
    found
}

#[test]
fn no_import_circle_between_the_files_of_any_folder() {
    let roots = crate_roots();
    assert!(roots.len() >= 8, "every crate is found: {roots:?}");
    let mut found = Vec::new();
    for root in &roots {
        for circle in circles(&sibling_imports(root)) {
            found.push(format!("{}: {circle}", root.display()));
        }
    }
    assert!(found.is_empty(), "import circles: {found:#?}");
}

#[test]
fn a_circle_between_two_files_is_caught_naming_both() {
    let dir = std::env::temp_dir().join(format!("layers-circle-{}", std::process::id()));
    let folder = dir.join("src").join("family");
    fs::create_dir_all(&folder).unwrap();
    fs::write(dir.join("src/lib.rs"), "mod family;\n").unwrap();
    // `step` reaches `recipe` through the folder's re-export: still an import of `recipe`.
    fs::write(
        folder.join("mod.rs"),
        "mod recipe;\nmod step;\npub use recipe::Recipe;\n",
    )
    .unwrap();
    fs::write(
        folder.join("recipe.rs"),
        "use super::step::Step;\npub struct Recipe;\n",
    )
    .unwrap();
    fs::write(
        folder.join("step.rs"),
        "use crate::family::{Recipe, step as _};\npub struct Step;\n",
    )
    .unwrap();
    let found = circles(&sibling_imports(&dir.join("src")));
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("family/recipe.rs names family::step")
            && found[0].contains("family/step.rs names family::recipe"),
        "{found:#?}"
    );
}

/// An import of a module declared later is caught where it goes through `lib.rs`'s re-export
/// (`use crate::Name`), as where it names the module.
#[test]
fn an_import_up_the_order_through_a_reexport_is_caught() {
    let dir = std::env::temp_dir().join(format!("layers-order-{}", std::process::id()));
    let src = dir.join("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(
        src.join("lib.rs"),
        "mod kept;\nmod names;\nmod c;\nmod d;\nmod e;\nmod f;\npub use names::Name;\n",
    )
    .unwrap();
    fs::write(src.join("kept.rs"), "use crate::Name;\npub struct Kept;\n").unwrap();
    fs::write(src.join("names.rs"), "pub struct Name;\n").unwrap();
    for module in ["c", "d", "e", "f"] {
        fs::write(src.join(format!("{module}.rs")), "").unwrap();
    }
    let caught = std::panic::catch_unwind(|| imports_stay_below(&src));
    fs::remove_dir_all(&dir).unwrap();
    let payload = caught.expect_err("an import up the order");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        message.contains("kept.rs names names")
            && message.contains("`names` is declared after `kept`"),
        "{message}"
    );
}

/// One row of a module table of docs/architecture.md: the folder its modules are in (below the
/// crate root), the modules, and the sibling modules the row says they use.
#[derive(Debug)]
struct Row {
    folder: Vec<String>,
    modules: Vec<String>,
    uses: Vec<String>,
    text: String,
}

/// The backticked words of `cell`.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The module tables of `markdown`: each under a `## \`dir\`` heading naming a crate's source
/// folder, rows `| modules | what it is | uses |`.
fn module_tables(markdown: &str) -> Vec<(String, Vec<Row>)> {
    let mut tables: Vec<(String, Vec<Row>)> = Vec::new();
    let mut in_table = false;
    for line in markdown.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            in_table = false;
            if let Some(dir) = backticked(heading).first() {
                tables.push((dir.trim_end_matches('/').to_string(), Vec::new()));
            }
            continue;
        }
        let Some((_, rows)) = tables.last_mut() else {
            continue;
        };
        if line.starts_with("| module |") {
            in_table = true;
            continue;
        }
        if !in_table || !line.starts_with('|') || line.starts_with("|---") {
            in_table = in_table && line.starts_with('|');
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
        let (mut folder, mut modules) = (Vec::new(), Vec::new());
        for name in backticked(cells[0]) {
            let mut parts: Vec<String> = name
                .trim_end_matches('/')
                .split('/')
                .map(String::from)
                .collect();
            let module = parts.pop().unwrap().trim_end_matches(".rs").to_string();
            if !parts.is_empty() {
                // `memory/host.rs`: this and the names after it are in `memory/`.
                folder = parts;
            }
            modules.push(module);
        }
        let uses = backticked(cells.last().unwrap())
            .into_iter()
            .map(|name| {
                name.trim_end_matches('/')
                    .trim_end_matches(".rs")
                    .to_string()
            })
            .collect();
        rows.push(Row {
            folder,
            modules,
            uses,
            text: line.to_string(),
        });
    }
    tables.retain(|(_, rows)| !rows.is_empty());
    tables
}

#[test]
fn architecture_md_lists_every_module_with_the_imports_it_has() {
    use std::collections::BTreeSet;
    let repository = crate::repository();
    let markdown = fs::read_to_string(repository.join("docs/architecture.md")).unwrap();
    let tables = module_tables(&markdown);
    let described: BTreeSet<&str> = tables.iter().map(|(dir, _)| dir.as_str()).collect();
    for crate_dir in ["src", "core/src", "parallel/src", "burn22/src"] {
        assert!(
            described.contains(crate_dir),
            "docs/architecture.md has no `{crate_dir}` table"
        );
    }
    let mut wrong = Vec::new();
    for (dir, rows) in &tables {
        let root = repository.join(dir);
        assert!(
            root.join("lib.rs").exists(),
            "`## {dir}`: not a crate's source folder"
        );
        let modules = modules_of(&root);
        let imports = sibling_imports(&root);
        // Every module of the crate root is in a row.
        let top: BTreeSet<String> = modules
            .iter()
            .filter(|path| path.len() == 1)
            .map(|path| path[0].clone())
            .collect();
        let listed: BTreeSet<String> = rows
            .iter()
            .filter(|row| row.folder.is_empty())
            .flat_map(|row| row.modules.clone())
            .collect();
        for missing in top.difference(&listed) {
            wrong.push(format!("{dir}: module `{missing}` is in no row"));
        }
        for row in rows {
            let members: BTreeSet<&String> = row.modules.iter().collect();
            for module in &row.modules {
                let path: Vec<String> = row.folder.iter().chain([module]).cloned().collect();
                if !modules.contains(&path) {
                    wrong.push(format!(
                        "{dir}: `{}` does not exist ({})",
                        path.join("/"),
                        row.text
                    ));
                }
            }
            let real: BTreeSet<&String> = imports
                .iter()
                .filter(|import| import.folder == row.folder && members.contains(&import.from))
                .map(|import| &import.to)
                .filter(|to| !members.contains(to))
                .collect();
            let stated: BTreeSet<&String> = row.uses.iter().collect();
            if real != stated {
                wrong.push(format!(
                    "{dir}: {:?} use {real:?}, the row says {stated:?} ({})",
                    row.modules, row.text
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md is wrong: {wrong:#?}"
    );
}

/// The rows of docs/architecture.md's folder table ("## The folders"), top first: each row's
/// folders (the backticked words of its first cell that end in `/`, without it).
fn folder_rows(markdown: &str) -> Vec<Vec<String>> {
    let section = markdown
        .split("\n## The folders")
        .nth(1)
        .expect("docs/architecture.md has a \"The folders\" section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .skip_while(|line| !line.starts_with("| folder |"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|row| {
            let first = row.split('|').nth(1).expect("a table row");
            backticked(first)
                .into_iter()
                .filter_map(|word| word.strip_suffix('/').map(str::to_string))
                .collect()
        })
        .collect()
}

/// The path dependencies a manifest names (`path = "…"` in any dependency table: normal, dev,
/// build, per target), as written.
fn path_dependencies(manifest: &str) -> Vec<String> {
    let mut in_dependencies = false;
    let mut paths = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line.contains("dependencies");
            continue;
        }
        if !in_dependencies || line.starts_with('#') {
            continue;
        }
        let Some(at) = line.find("path = \"") else {
            continue;
        };
        let rest = &line[at + "path = \"".len()..];
        paths.push(rest[..rest.find('"').expect("a closing quote")].to_string());
    }
    paths
}

/// `dir` joined with `relative`, `..` and `.` folded (`burn22` + `../kits/x` is `kits/x`).
fn joined(dir: &str, relative: &str) -> String {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    parts.join("/")
}

/// Which row of `rows` holds the folder `dir` (below the repository; the root manifest's `""` is
/// the library of `src/`): the row of the longest folder it is in.
fn row_of(rows: &[Vec<String>], dir: &str) -> Option<usize> {
    let dir = if dir.is_empty() { "src" } else { dir };
    rows.iter()
        .enumerate()
        .flat_map(|(index, folders)| folders.iter().map(move |folder| (index, folder)))
        .filter(|(_, folder)| dir == folder.as_str() || dir.starts_with(&format!("{folder}/")))
        .max_by_key(|(_, folder)| folder.len())
        .map(|(index, _)| index)
}

/// What breaks the folder table's rule in `manifests` (each manifest's folder and text): a path
/// dependency on a folder below the manifest's own, or a manifest or dependency in a folder the
/// table lacks.
fn upward_dependencies(rows: &[Vec<String>], manifests: &[(String, String)]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (dir, text) in manifests {
        let manifest = format!("{dir}/Cargo.toml")
            .trim_start_matches('/')
            .to_string();
        let Some(from) = row_of(rows, dir) else {
            wrong.push(format!("{manifest}: its folder is in no row of the table"));
            continue;
        };
        for path in path_dependencies(text) {
            let target = joined(dir, &path);
            match row_of(rows, &target) {
                None => wrong.push(format!("{manifest}: `{path}` is in no row of the table")),
                Some(to) if to > from => wrong.push(format!(
                    "{manifest}: `{path}` ({}/) stands below {}/ in the table",
                    rows[to].join("/, "),
                    rows[from].join("/, ")
                )),
                Some(_) => {}
            }
        }
    }
    wrong
}

/// Every `Cargo.toml` of the repository, `target/` and hidden folders left out: its folder below
/// the repository and its text.
fn manifests(repository: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut pending = vec![repository.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let manifest = dir.join("Cargo.toml");
        if manifest.exists() {
            let relative = dir.strip_prefix(repository).unwrap();
            found.push((
                relative.to_string_lossy().replace('\\', "/"),
                fs::read_to_string(&manifest).unwrap(),
            ));
        }
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() && !name.starts_with('.') && name != "target" {
                pending.push(path);
            }
        }
    }
    found.sort();
    found
}

/// "A folder imports only folders above it": every path dependency of every manifest, dev and
/// build ones included, against docs/architecture.md's folder table.
#[test]
fn every_path_dependency_points_up_the_folder_table() {
    let repository = crate::repository();
    let markdown = fs::read_to_string(repository.join("docs/architecture.md")).unwrap();
    let rows = folder_rows(&markdown);
    assert!(rows.len() > 12, "the folder table was read: {rows:?}");
    let manifests = manifests(repository);
    assert!(manifests.len() > 12, "the manifests were found");
    let wrong = upward_dependencies(&rows, &manifests);
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's folder table says a folder imports only folders above it: \
         {wrong:#?}"
    );
}

#[test]
fn a_dependency_running_down_the_folder_table_is_caught() {
    let rows = vec![
        vec!["core".to_string()],
        vec!["src".to_string(), "benches".to_string()],
        vec!["kits/app-kit".to_string()],
    ];
    let manifest = |dir: &str, text: &str| (dir.to_string(), text.to_string());
    let fine = [
        manifest(
            "",
            "[dependencies]\ncore = { path = \"core\" }\n[[bench]]\npath = \"x\"\n",
        ),
        manifest(
            "kits/app-kit",
            "[dev-dependencies]\nx = { path = \"../../core\" }\n",
        ),
    ];
    assert!(upward_dependencies(&rows, &fine).is_empty());
    let wrong = [
        manifest(
            "core",
            "[dev-dependencies]\nkit = { path = \"../kits/app-kit\" }\n",
        ),
        manifest("tools", "[dependencies]\n"),
    ];
    let found = upward_dependencies(&rows, &wrong);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].starts_with("core/Cargo.toml: `../kits/app-kit`"),
        "{found:#?}"
    );
    assert!(
        found[1].contains("tools/Cargo.toml: its folder is in no row"),
        "{found:#?}"
    );
}
