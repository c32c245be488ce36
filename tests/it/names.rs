//! Region names and indices: what `#[checkpoint]`, the function forms and `checkpoint_sequential`
//! call their regions.

use burn::backend::{Autodiff, NdArray};
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use burn_checkpoint::counters::Counters;
use burn_checkpoint::{
    Checkpointed, Layer, Region, RegionId, Segments, checkpoint, checkpoint_sequential,
};

type B = Checkpointed<Autodiff<NdArray>>;

fn here() -> RegionId {
    Region::current().expect("inside a region")
}

struct Block;

impl Block {
    #[checkpoint]
    fn forward<B2: Backend>(&self, x: Tensor<B2, 2>) -> (Tensor<B2, 2>, RegionId) {
        (x, here())
    }

    #[checkpoint(name = "mlp", policy = burn_checkpoint::Policy::SaveComputeBound)]
    fn named(&self) -> RegionId {
        here()
    }
}

#[checkpoint]
fn free_function() -> RegionId {
    here()
}

#[test]
fn checkpointed_methods_are_named_by_their_type_and_count_their_calls() {
    RegionId::restart_indices();
    let x = Tensor::<B, 2>::ones([2, 2], &Default::default());
    let (_, first) = Block.forward(x.clone());
    let (_, second) = Block.forward(x);
    assert_eq!(first.name.to_string(), "it::names::Block::forward");
    assert_eq!((first.index, second.index), (0, 1));
    assert_eq!(second.to_string(), "it::names::Block::forward#1");

    assert_eq!(Block.named().to_string(), "mlp#0");
    assert_eq!(free_function().to_string(), "it::names::free_function#0");

    RegionId::restart_indices();
    assert_eq!(
        Block.named().to_string(),
        "mlp#0",
        "reset starts the indices again"
    );
    // Resetting the counters leaves the indices (saved plans address them) as they are.
    Counters::reset();
    assert_eq!(Block.named().to_string(), "mlp#1");
}

#[test]
fn function_forms_are_named_by_their_place_or_their_name() {
    RegionId::restart_indices();
    let line = line!() + 1;
    let place = checkpoint(here);
    assert_eq!(
        place.name.to_string(),
        format!("tests/it/names.rs:{line}:17")
    );
    let (outer, inner) = Region::named("outer").run(|| (here(), Region::named("inner").run(here)));
    assert_eq!(
        (outer.to_string(), inner.to_string()),
        ("outer#0".into(), "inner#0".into())
    );
    assert!(Region::current().is_none());
}

struct Probe;

impl Layer<Vec<Option<RegionId>>> for Probe {
    fn forward(&self, mut seen: Vec<Option<RegionId>>) -> Vec<Option<RegionId>> {
        seen.push(Region::current());
        seen
    }
}

#[test]
fn a_sequential_stack_names_its_segments_after_its_place() {
    RegionId::restart_indices();
    let probes: Vec<Probe> = (0..9).map(|_| Probe).collect();
    let line = line!() + 1;
    let seen = checkpoint_sequential(&probes, Segments::Count(3), Vec::new());
    let name = format!("tests/it/names.rs:{line}:16");
    let seen: Vec<Option<String>> = seen
        .into_iter()
        .map(|id| id.map(|id| id.to_string()))
        .collect();
    let segment = |index| Some(format!("{name}#{index}"));
    assert_eq!(
        seen,
        [
            segment(0),
            segment(0),
            segment(0),
            segment(1),
            segment(1),
            segment(1),
            None,
            None,
            None
        ]
    );
}
