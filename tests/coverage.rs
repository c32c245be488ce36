//! Op coverage, checked against Burn's own list: the test reads burn-autodiff's source (the one
//! this crate builds against), finds every method that `Autodiff` implements of `FloatTensorOps`,
//! `ModuleOps` and `ActivationOps`, and classifies how Burn builds its graph node:
//! compute-bound (`.compute_bound()`: Burn stores the output), memory-bound (`.memory_bound()`:
//! recomputable under `BalancedCheckpointing`), both, or neither (no graph node of its own).
//! Then:
//! - every such method is listed by the decorator (`coverage::ops()`), so that an op a later Burn
//!   adds fails here until it is routed;
//! - every compute-bound op has a region version, or is in `coverage::DELIBERATELY_STORED`;
//! - every memory-bound op has a region version (Burn's own recompute walk is not used);
//! - the lists of `coverage` and `docs/coverage.md` agree with the code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use burn_checkpoint::coverage::{self, DELIBERATELY_STORED, HAND_WRITTEN, OpEntry, Routing};

/// The traits whose autodiff implementations build graph nodes.
const TRAITS: [&str; 3] = ["FloatTensorOps", "ModuleOps", "ActivationOps"];

/// How burn-autodiff builds an op's graph node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    /// `.compute_bound()`, or a node whose computing property stays `Ambiguous` (`float_cat`),
    /// which Burn's checkpointer treats the same: the output is stored.
    ComputeBound,
    /// `.memory_bound()`: recomputed under `BalancedCheckpointing`.
    MemoryBound,
    /// Both, on different paths.
    Both,
    /// No graph node of its own (creation, comparisons, data access, decompositions).
    None,
}

#[test]
fn every_op_burn_stores_is_recomputed_or_documented() {
    let burn = burn_autodiff_ops();
    let listed: BTreeMap<(&str, &str), &OpEntry> = coverage::ops()
        .map(|op| ((op.family, op.name), op))
        .collect();
    let hand_written: BTreeMap<&str, Routing> = HAND_WRITTEN
        .iter()
        .map(|(name, routing, _)| (*name, *routing))
        .collect();
    let stored: BTreeMap<&str, &str> = DELIBERATELY_STORED.iter().copied().collect();
    // What an op does inside a region: hand-written ones say so in `HAND_WRITTEN`.
    let routing = |op: &OpEntry| match op.routing {
        Routing::Custom => hand_written.get(op.name).copied(),
        routing => Some(routing),
    };

    let mut problems = Vec::new();
    for ((family, name), node) in &burn {
        let Some(op) = listed.get(&(family.as_str(), name.as_str())) else {
            problems.push(format!(
                "`{family}::{name}`: burn-autodiff implements it, the decorator does not list it \
                 (add it to src/backend/)"
            ));
            continue;
        };
        let Some(routing) = routing(op) else {
            problems.push(format!(
                "`{name}`: written out by hand, but missing from `coverage::HAND_WRITTEN`"
            ));
            continue;
        };
        match node {
            Node::ComputeBound | Node::Both => {
                let ok = routing == Routing::Region
                    || (routing == Routing::Stored && stored.contains_key(name.as_str()));
                if !ok {
                    problems.push(format!(
                        "`{name}`: Burn builds it compute-bound (stores its output), the decorator \
                         routes it {routing:?}: give it a region version, or list it in \
                         `coverage::DELIBERATELY_STORED` with the reason"
                    ));
                }
            }
            Node::MemoryBound => {
                if routing != Routing::Region {
                    problems.push(format!(
                        "`{name}`: Burn builds it memory-bound, the decorator routes it \
                         {routing:?}: give it a region version"
                    ));
                }
            }
            Node::None => {
                if routing == Routing::Stored {
                    problems.push(format!(
                        "`{name}`: Burn builds no graph node for it, the decorator routes it \
                         {routing:?}: forward it as it is"
                    ));
                }
            }
        }
    }

    // The deliberately stored list names compute-bound ops that are indeed stored, and every
    // stored op is on it.
    for (name, _) in DELIBERATELY_STORED {
        let node = burn
            .iter()
            .find(|((_, op), _)| op == name)
            .map(|(_, node)| *node);
        if !matches!(node, Some(Node::ComputeBound | Node::Both)) {
            problems.push(format!(
                "`{name}` is in `DELIBERATELY_STORED`, but burn-autodiff does not build it \
                 compute-bound ({node:?})"
            ));
        }
    }
    for op in coverage::ops() {
        if routing(op) == Some(Routing::Stored) && !stored.contains_key(op.name) {
            problems.push(format!(
                "`{}` is routed stored without a reason in `DELIBERATELY_STORED`",
                op.name
            ));
        }
        if routing(op) != Some(Routing::Stored) && stored.contains_key(op.name) {
            problems.push(format!(
                "`{}` is in `DELIBERATELY_STORED` but routed {:?}",
                op.name, op.routing
            ));
        }
    }
    // `HAND_WRITTEN` lists exactly the hand-written ops.
    let custom: BTreeSet<&str> = coverage::ops()
        .filter(|op| op.routing == Routing::Custom)
        .map(|op| op.name)
        .collect();
    for name in hand_written.keys() {
        if !custom.contains(name) {
            problems.push(format!(
                "`{name}` is in `HAND_WRITTEN` but is not written out by hand"
            ));
        }
    }

    assert!(
        problems.is_empty(),
        "op coverage against burn-autodiff ({} ops read from {}):\n- {}",
        burn.len(),
        autodiff_dir().display(),
        problems.join("\n- ")
    );
}

#[test]
fn docs_list_the_routing_of_every_op() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/coverage.md"))
            .expect("docs/coverage.md");
    let hand_written: BTreeMap<&str, Routing> = HAND_WRITTEN
        .iter()
        .map(|(name, routing, _)| (*name, *routing))
        .collect();
    let with_routing = |wanted: Routing| -> BTreeSet<&str> {
        coverage::ops()
            .filter(|op| match op.routing {
                Routing::Custom => hand_written.get(op.name) == Some(&wanted),
                routing => routing == wanted,
            })
            .map(|op| op.name)
            .collect()
    };
    let mut problems = Vec::new();
    let sections = [
        (
            "## Recomputed: region versions of this crate",
            with_routing(Routing::Region),
        ),
        ("## Stored deliberately", with_routing(Routing::Stored)),
    ];
    for (heading, expected) in sections {
        let Some((count, listed)) = doc_section(&doc, heading) else {
            problems.push(format!("docs/coverage.md has no section `{heading} (N)`"));
            continue;
        };
        if count != expected.len() {
            problems.push(format!(
                "docs/coverage.md: `{heading}` says {count}, the code has {}",
                expected.len()
            ));
        }
        for name in expected.difference(&listed) {
            problems.push(format!("docs/coverage.md: `{heading}` misses `{name}`"));
        }
        for name in listed.difference(&expected) {
            problems.push(format!(
                "docs/coverage.md: `{heading}` lists `{name}`, the code does not"
            ));
        }
    }
    let flat = squash(&doc);
    for (name, reason) in DELIBERATELY_STORED {
        if !flat.contains(&squash(&format!("`{name}`: {reason}"))) {
            problems.push(format!(
                "docs/coverage.md does not give `{name}` with its reason from \
                 `DELIBERATELY_STORED` (as \"`{name}`: <reason>\")"
            ));
        }
    }
    assert!(problems.is_empty(), "\n- {}", problems.join("\n- "));
}

/// The parser finds what it should in a known snippet: methods of the right impl only, with
/// comments, strings, char literals, lifetimes and nested items not confusing it.
#[test]
fn parser_reads_methods_and_node_kinds() {
    let source = r##"
        // impl FloatTensorOps<Self> for Autodiff<B, C> { fn commented() {} }
        impl<B: Backend> Helper for Autodiff<B> { fn not_this_one() { x.compute_bound() } }
        impl<B: Backend, C: CheckpointStrategy> FloatTensorOps<Self> for Autodiff<B, C> {
            fn stored<'a>(x: &'a T) -> T {
                struct Inner;
                impl Inner { fn nested() { y.memory_bound() } }
                let s = "}{ .memory_bound()"; let c = '}'; let r = r#"{"#;
                /* { nested /* comment */ } */
                prep.compute_bound().stateful()
            }
            fn recomputed(x: T) -> T {
                Op.prepare::<C>([x.node])
                    .memory_bound()
                    .retro_forward(R)
            }
            async fn plain(x: T) -> Result<TensorData, E> { B::read(x).await }
            fn both(x: T) -> T { if a { p.compute_bound() } else { p.memory_bound() } }
            fn cat(x: Vec<T>) -> T { let p = ComputingProperty::Ambiguous; p }
        }
    "##;
    let methods = impl_methods(source, "FloatTensorOps");
    let found: Vec<(&str, Node)> = methods.iter().map(|(n, k)| (n.as_str(), *k)).collect();
    assert_eq!(
        found,
        [
            ("stored", Node::ComputeBound),
            ("recomputed", Node::MemoryBound),
            ("plain", Node::None),
            ("both", Node::Both),
            ("cat", Node::ComputeBound),
        ]
    );
}

/// Every method burn-autodiff's `Autodiff` implements of [`TRAITS`], keyed by (trait, name).
fn burn_autodiff_ops() -> BTreeMap<(String, String), Node> {
    let ops_dir = autodiff_dir().join("src/ops");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&ops_dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", ops_dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    files.sort();
    let mut ops = BTreeMap::new();
    let mut per_trait = BTreeMap::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        for name in TRAITS {
            for (method, node) in impl_methods(&source, name) {
                *per_trait.entry(name).or_insert(0) += 1;
                ops.insert((name.to_string(), method), node);
            }
        }
    }
    // A parser that silently finds nothing would pass everything: check it found Burn's lists.
    for (name, at_least) in [
        ("FloatTensorOps", 100),
        ("ModuleOps", 20),
        ("ActivationOps", 4),
    ] {
        let found = per_trait.get(name).copied().unwrap_or(0);
        assert!(
            found >= at_least,
            "found only {found} methods of `impl {name} for Autodiff` in {}",
            ops_dir.display()
        );
    }
    let count = |kind| ops.values().filter(|node| **node == kind).count();
    assert!(count(Node::ComputeBound) >= 30 && count(Node::MemoryBound) >= 40);
    ops
}

/// The host's target triple, from `rustc -vV`.
fn host_triple() -> String {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc)
        .arg("-vV")
        .output()
        .unwrap_or_else(|e| panic!("running {rustc:?} -vV: {e}"));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .expect("`rustc -vV` names the host")
        .trim()
        .to_string()
}

/// burn-autodiff 0.21.0's directory, from `cargo metadata` (run with the cargo that runs the
/// tests).
fn autodiff_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let cargo = std::env::var_os("CARGO")
            .or_else(|| option_env!("CARGO").map(Into::into))
            .unwrap_or_else(|| "cargo".into());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        // Only the host's packages: a fresh cargo cache holds no other platform's (windows-sys,
        // android_system_properties, …), and `--offline` cannot fetch them.
        let output = Command::new(&cargo)
            .args([
                "metadata",
                "--format-version",
                "1",
                "--offline",
                "--filter-platform",
                &host_triple(),
                "--manifest-path",
            ])
            .arg(&manifest)
            .output()
            .unwrap_or_else(|e| panic!("running {cargo:?} metadata: {e}"));
        assert!(
            output.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata = Json::parse(&String::from_utf8(output.stdout).unwrap());
        let packages = metadata.get("packages").and_then(Json::array).unwrap();
        let package = packages
            .iter()
            .find(|p| {
                p.get("name").and_then(Json::str) == Some("burn-autodiff")
                    && p.get("version").and_then(Json::str) == Some("0.21.0")
            })
            .expect("burn-autodiff 0.21.0 among the packages of `cargo metadata`");
        let manifest_path = package.get("manifest_path").and_then(Json::str).unwrap();
        Path::new(manifest_path).parent().unwrap().to_path_buf()
    })
    .clone()
}

/// The methods of every `impl ... <trait_name><...> for Autodiff<...> { ... }` in `source`, with
/// how each builds its graph node.
fn impl_methods(source: &str, trait_name: &str) -> Vec<(String, Node)> {
    let code = mask(source);
    let bytes = code.as_bytes();
    let mut methods = Vec::new();
    let mut at = 0;
    while let Some(start) = find_word(&code, "impl", at) {
        let Some(open) = code[start..].find(['{', ';']).map(|i| start + i) else {
            break;
        };
        let header = &code[start..open];
        let close = matching_brace(bytes, open);
        let is_target = header.split_once(" for ").is_some_and(|(tr, ty)| {
            contains_word(tr, trait_name) && ty.trim().starts_with("Autodiff<")
        });
        if bytes[open] == b'{' && is_target {
            methods.extend(methods_in(&code, open + 1, close));
        }
        // Skip the whole block: impls nested in method bodies are not the trait's methods.
        at = if bytes[open] == b'{' {
            close + 1
        } else {
            open + 1
        };
    }
    methods
}

/// The `fn` items directly inside the block `code[from..to]`.
fn methods_in(code: &str, from: usize, to: usize) -> Vec<(String, Node)> {
    let bytes = code.as_bytes();
    let mut methods = Vec::new();
    let mut at = from;
    while let Some(start) = find_word(code, "fn", at).filter(|&i| i < to) {
        let name: String = code[start + 2..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The body is the first `{` after the parameter list (or `;`: no body).
        let params = start + code[start..].find('(').unwrap();
        let after = matching(bytes, params, b'(', b')') + 1;
        let end = after + code[after..].find(['{', ';']).unwrap();
        if bytes[end] == b';' {
            at = end + 1;
            continue;
        }
        let close = matching_brace(bytes, end);
        methods.push((name, classify(&code[end..=close])));
        at = close + 1;
    }
    methods
}

/// How a method body builds its node. Items nested in the body (the `Backward` and
/// `RetroForward` impls of the op's structs) are left out: they run in backward.
fn classify(body: &str) -> Node {
    let mut own = String::new();
    let mut at = 0;
    while let Some(start) = find_word(body, "impl", at) {
        own.push_str(&body[at..start]);
        let open = start + body[start..].find('{').expect("an impl block");
        at = matching_brace(body.as_bytes(), open) + 1;
    }
    own.push_str(&body[at..]);
    let body: String = own.chars().filter(|c| !c.is_whitespace()).collect();
    let compute =
        body.contains(".compute_bound()") || body.contains("ComputingProperty::Ambiguous");
    let memory = body.contains(".memory_bound()");
    match (compute, memory) {
        (true, true) => Node::Both,
        (true, false) => Node::ComputeBound,
        (false, true) => Node::MemoryBound,
        (false, false) => Node::None,
    }
}

/// `source` with comments and the contents of string and char literals blanked out (same
/// length, same line breaks), so that braces and words found in it are code.
fn mask(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&chars, i) {
            // r"..", r#".."#, br".."
            let open = chars[i..].iter().position(|&c| c == '"').unwrap() + i;
            out.extend(std::iter::repeat_n(' ', open + 1 - i));
            i = open + 1;
            let closing: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            while i < chars.len() && !chars[i..].starts_with(&closing) {
                out.push(blank(chars[i]));
                i += 1;
            }
            out.extend(std::iter::repeat_n(' ', closing.len()));
            i += closing.len();
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A char literal ('x', '\n', '\u{..}'); otherwise a lifetime, left as it is.
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    // Multi-byte chars became one byte each only inside blanked text; code keeps its chars, so
    // byte offsets stay consistent within `out` itself, which is all the scanner uses.
    out
}

/// At a raw string's start (`r"`, `r#"`, `br"`...), how many `#` it uses.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    let prev_is_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if prev_is_ident || chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|&&c| c == '#').count();
    (chars.get(j + hashes) == Some(&'"')).then_some(hashes)
}

/// The index of the `}` closing the `{` at `open`.
fn matching_brace(bytes: &[u8], open: usize) -> usize {
    matching(bytes, open, b'{', b'}')
}

fn matching(bytes: &[u8], open: usize, left: u8, right: u8) -> usize {
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        if b == left {
            depth += 1;
        } else if b == right {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    panic!("unbalanced `{}` at byte {open}", left as char)
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The next occurrence of `word` as a whole word at or after `from`.
fn find_word(code: &str, word: &str, from: usize) -> Option<usize> {
    let bytes = code.as_bytes();
    let mut at = from;
    while let Some(i) = code.get(at..)?.find(word).map(|i| at + i) {
        let before = i == 0 || !is_ident(bytes[i - 1]);
        let after = bytes.get(i + word.len()).is_none_or(|&b| !is_ident(b));
        if before && after {
            return Some(i);
        }
        at = i + word.len();
    }
    None
}

fn contains_word(text: &str, word: &str) -> bool {
    find_word(text, word, 0).is_some()
}

/// The section of `doc` under `heading (N)`: N, and the op names in backticks on its list lines
/// (lines that start with a backtick, or with `- ` and a backtick).
fn doc_section(doc: &str, heading: &str) -> Option<(usize, BTreeSet<&'static str>)> {
    let start = doc.find(&format!("{heading} ("))?;
    let rest = &doc[start + heading.len() + 2..];
    let count = rest[..rest.find(')')?].parse().ok()?;
    let body = &rest[rest.find('\n')?..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let names: BTreeSet<&str> = coverage::ops().map(|op| op.name).collect();
    let listed = body
        .lines()
        .filter(|line| line.trim_start().trim_start_matches("- ").starts_with('`'))
        .flat_map(|line| line.split('`').skip(1).step_by(2))
        .filter_map(|word| names.get(word).copied())
        .collect();
    Some((count, listed))
}

/// `text` with every run of whitespace made one space.
fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Just enough JSON to read `cargo metadata`.
#[derive(Debug)]
enum Json {
    Object(Vec<(String, Json)>),
    Array(Vec<Json>),
    Str(String),
    /// Numbers, booleans and null, as written.
    Other,
}

impl Json {
    fn parse(text: &str) -> Json {
        let chars: Vec<char> = text.chars().collect();
        Self::value(&chars, &mut 0)
    }

    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    fn str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    fn skip_space(chars: &[char], at: &mut usize) {
        while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
            *at += 1;
        }
    }

    fn value(chars: &[char], at: &mut usize) -> Json {
        Self::skip_space(chars, at);
        match chars[*at] {
            '{' => {
                *at += 1;
                let mut fields = Vec::new();
                loop {
                    Self::skip_space(chars, at);
                    match chars[*at] {
                        '}' => {
                            *at += 1;
                            return Json::Object(fields);
                        }
                        ',' => *at += 1,
                        _ => {
                            let key = Self::string(chars, at);
                            Self::skip_space(chars, at);
                            assert_eq!(chars[*at], ':', "JSON: expected `:`");
                            *at += 1;
                            fields.push((key, Self::value(chars, at)));
                        }
                    }
                }
            }
            '[' => {
                *at += 1;
                let mut items = Vec::new();
                loop {
                    Self::skip_space(chars, at);
                    match chars[*at] {
                        ']' => {
                            *at += 1;
                            return Json::Array(items);
                        }
                        ',' => *at += 1,
                        _ => items.push(Self::value(chars, at)),
                    }
                }
            }
            '"' => Json::Str(Self::string(chars, at)),
            _ => {
                while chars
                    .get(*at)
                    .is_some_and(|c| !matches!(c, ',' | '}' | ']') && !c.is_whitespace())
                {
                    *at += 1;
                }
                Json::Other
            }
        }
    }

    fn string(chars: &[char], at: &mut usize) -> String {
        assert_eq!(chars[*at], '"', "JSON: expected a string");
        *at += 1;
        let mut out = String::new();
        loop {
            let c = chars[*at];
            *at += 1;
            match c {
                '"' => return out,
                '\\' => {
                    let e = chars[*at];
                    *at += 1;
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'u' => {
                            let hex: String = chars[*at..*at + 4].iter().collect();
                            *at += 4;
                            let code = u32::from_str_radix(&hex, 16).unwrap();
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
    }
}
