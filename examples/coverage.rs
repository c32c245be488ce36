//! Prints how the decorator routes every op of Burn's backend traits inside a region, as
//! markdown: `cargo run --example coverage`.

use std::collections::BTreeMap;

use burn_checkpoint::coverage::{self, Routing};

fn main() {
    let mut by_routing: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for op in coverage::ops() {
        by_routing
            .entry(format!("{:?}", op.routing()))
            .or_default()
            .push(op);
    }
    for (routing, ops) in &by_routing {
        println!("## {routing} ({})\n", ops.len());
        println!("| op | trait | kind | note |\n|---|---|---|---|");
        for op in ops {
            println!(
                "| `{}` | {} | {:?} | {} |",
                op.name(),
                op.family(),
                op.kind(),
                op.note()
            );
        }
        println!();
    }
    let stored = by_routing.get(&format!("{:?}", Routing::Stored));
    println!(
        "{} ops in all; {} stored inside regions.",
        coverage::ops().count(),
        stored.map_or(0, Vec::len)
    );
}
