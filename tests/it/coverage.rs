//! Op coverage, checked against Burn's own list: the test parses burn-autodiff's source (the one
//! this crate builds against) with `syn`, finds every method that `Autodiff` implements of
//! `FloatTensorOps`, `ModuleOps` and `ActivationOps`, and classifies how Burn builds its graph
//! node: compute-bound (`.compute_bound()`: Burn stores the output), memory-bound
//! (`.memory_bound()`: recomputable under `BalancedCheckpointing`), both, or neither (no graph
//! node of its own). Then, against `coverage::ops()` (the decorator's signature lines):
//! - every such method is listed, so that an op a later Burn adds fails here until it is routed;
//! - every op that builds a node has a region version, or is routed stored with its reason;
//! - no op that builds no node is routed stored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use burn_checkpoint::coverage::{self, Routing};
use syn::visit::Visit;

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
fn every_op_burn_builds_a_node_for_is_recomputed_or_stored_with_a_reason() {
    let burn = burn_autodiff_ops();
    let mut problems = Vec::new();
    for ((family, name), node) in &burn {
        let Some(op) = coverage::ops().find(|op| op.family() == family && op.name() == name) else {
            problems.push(format!(
                "`{family}::{name}`: burn-autodiff implements it, the decorator does not list it \
                 (add its signature to src/backend/)"
            ));
            continue;
        };
        let routing = op.routing();
        match node {
            Node::ComputeBound | Node::Both | Node::MemoryBound => {
                let stored_with_reason = routing == Routing::Stored && !op.note().is_empty();
                if routing != Routing::Region && !stored_with_reason {
                    problems.push(format!(
                        "`{name}`: Burn builds a {node:?} node for it, the decorator routes it \
                         {routing:?}: give it a region version (`#[region(..)]`), or route it \
                         `#[stored(Kind, \"reason\")]`"
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
    assert!(problems.is_empty(), "\n- {}", problems.join("\n- "));
}

/// The classifier finds what it should in a known snippet: methods of the right impl only, with
/// nested items (the `Backward` impls of an op's structs) left out.
#[test]
fn the_classifier_reads_methods_and_node_kinds() {
    let source = r##"
        // impl FloatTensorOps<Self> for Autodiff<B, C> { fn commented() {} }
        impl<B: Backend> Helper for Autodiff<B> { fn not_this_one() { x.compute_bound() } }
        impl<B: Backend, C: CheckpointStrategy> FloatTensorOps<Self> for Autodiff<B, C> {
            fn stored<'a>(x: &'a T) -> T {
                struct Inner;
                impl Inner { fn nested() { y.memory_bound() } }
                let s = "}{ .memory_bound()"; let c = '}'; let r = r#"{"#;
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
    let file = syn::parse_file(source).unwrap();
    let found = impl_methods(&file, "FloatTensorOps");
    let found: Vec<(&str, Node)> = found.iter().map(|(n, k)| (n.as_str(), *k)).collect();
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
    for path in files {
        let source = std::fs::read_to_string(&path).unwrap();
        let file =
            syn::parse_file(&source).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
        for name in TRAITS {
            for (method, node) in impl_methods(&file, name) {
                *per_trait.entry(name).or_insert(0) += 1;
                ops.insert((name.to_string(), method), node);
            }
        }
    }
    // A reader that silently finds nothing would pass everything: check it found Burn's lists.
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

/// The methods of every `impl ... <trait_name><...> for Autodiff<...>` in `file`, with how each
/// builds its graph node.
fn impl_methods(file: &syn::File, trait_name: &str) -> Vec<(String, Node)> {
    let last_ident = |path: &syn::Path| path.segments.last().map(|s| s.ident.to_string());
    let mut methods = Vec::new();
    for item in &file.items {
        let syn::Item::Impl(block) = item else {
            continue;
        };
        let implements = block
            .trait_
            .as_ref()
            .is_some_and(|(_, path, _)| last_ident(path).as_deref() == Some(trait_name));
        let for_autodiff = matches!(&*block.self_ty, syn::Type::Path(ty)
            if last_ident(&ty.path).as_deref() == Some("Autodiff"));
        if !(implements && for_autodiff) {
            continue;
        }
        for item in &block.items {
            if let syn::ImplItem::Fn(method) = item {
                let mut calls = NodeCalls::default();
                calls.visit_block(&method.block);
                methods.push((method.sig.ident.to_string(), calls.node()));
            }
        }
    }
    methods
}

/// What a method body calls to build its node. Items nested in the body (the `Backward` and
/// `RetroForward` impls of the op's structs) are left out: they run in backward.
#[derive(Default)]
struct NodeCalls {
    compute: bool,
    memory: bool,
}

impl NodeCalls {
    fn node(&self) -> Node {
        match (self.compute, self.memory) {
            (true, true) => Node::Both,
            (true, false) => Node::ComputeBound,
            (false, true) => Node::MemoryBound,
            (false, false) => Node::None,
        }
    }
}

impl<'ast> Visit<'ast> for NodeCalls {
    fn visit_item(&mut self, _: &'ast syn::Item) {}

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        match call.method.to_string().as_str() {
            "compute_bound" => self.compute = true,
            "memory_bound" => self.memory = true,
            _ => {}
        }
        syn::visit::visit_expr_method_call(self, call);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let names: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if names.ends_with(&["ComputingProperty".into(), "Ambiguous".into()]) {
            self.compute = true;
        }
        syn::visit::visit_path(self, path);
    }
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
    let cargo = std::env::var_os("CARGO")
        .or_else(|| option_env!("CARGO").map(Into::into))
        .unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    // Only the host's packages: a fresh cargo cache holds no other platform's (windows-sys,
    // android_system_properties, …), and `--offline` cannot fetch them.
    let output = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host_triple(), "--manifest-path"])
        .arg(&manifest)
        .output()
        .unwrap_or_else(|e| panic!("running {cargo:?} metadata: {e}"));
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let package = metadata["packages"]
        .as_array()
        .expect("`cargo metadata` lists packages")
        .iter()
        .find(|p| p["name"] == "burn-autodiff" && p["version"] == "0.21.0")
        .expect("burn-autodiff 0.21.0 among the packages of `cargo metadata`");
    let manifest_path = package["manifest_path"].as_str().unwrap();
    Path::new(manifest_path).parent().unwrap().to_path_buf()
}
