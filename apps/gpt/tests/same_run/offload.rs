//! Offload over many training steps (`Cut::BlockOffload`: a region per block whose stored
//! operands are read back on a copy thread and uploaded one region ahead of backward), against
//! the same regions without offload, on NdArray and on a cubecl runtime (Burn's wgpu with and
//! without fusion; Mesa's lavapipe in CI):
//! - the parameters after every step bitwise equal (a host buffer reused or read before its copy
//!   finished would show here, as the silent corruption torchtitan's async offload once had);
//!   with fusion, between the offloaded runs (see `offload_matches_regions_step_by_step`);
//! - the training thread's device reads per step equal (offload adds no sync to it), and forward
//!   never waits on a copy under the default in-flight bound;
//! - on wgpu the training thread issues the reads itself (its read returns before it is done),
//!   on NdArray the copy thread makes them whole;
//! - under a bound smaller than one copy, forward waits (counted) and the values stay the same;
//!   under a bound of 0, forward waits for every copy (synchronous offload), the same again.

use bench_kit::agreement::Agreement;
use burn::backend::Autodiff;
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::AdamWConfig;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use burn_checkpoint::counters::{self, Counters};
use burn_checkpoint::memory::OffloadedBytes;
use burn_checkpoint::{Checkpointed, Settings};
use gpt::{Cut, Gpt, GptConfig};

const STEPS: usize = 6;
/// The bytes of one block's input.
const COPY: u64 = 4 * 16 * 32 * 4;

/// What one step left: the parameters' values, the device reads it took, what offload copied.
struct Step {
    params: Vec<Vec<u32>>,
    reads: u64,
    copies: counters::OffloadCopies,
}

fn params<B: Backend>(model: &Gpt<B>) -> Vec<Vec<u32>> {
    struct Collect(Vec<Vec<u32>>);
    impl<B: Backend> ModuleVisitor<B> for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let values = param.val().into_data().to_vec::<f32>().unwrap();
            self.0.push(values.iter().map(|v| v.to_bits()).collect());
        }
    }
    let mut collect = Collect(Vec::new());
    model.visit(&mut collect);
    collect.0
}

/// `STEPS` AdamW steps of a 4-block GPT under `cut`, from the same weights and tokens.
fn train<B: AutodiffBackend>(cut: Cut, tokens: &TensorData) -> Vec<Step> {
    let device = B::Device::default();
    B::seed(&device, 3);
    let mut model = Some(
        GptConfig::new(64, 32, 4, 4, 16)
            .init::<B>(&device)
            .with_cut(cut),
    );
    let tokens = Tensor::<B, 2, Int>::from_data(tokens.clone(), &device);
    let mut optimizer = AdamWConfig::new().init();
    (0..STEPS)
        .map(|_| {
            Counters::reset();
            let (next, loss) =
                model
                    .take()
                    .unwrap()
                    .train_step(&mut optimizer, tokens.clone(), 1e-2, || {});
            // The reads a training loop makes: its loss.
            let _ = loss.into_scalar();
            // Read before the parameters are (their reads are the test's, not the step's).
            let (reads, copies) = (Counters::now().device_reads, Counters::now().offload);
            let params = params(&next);
            model = Some(next);
            Step {
                params,
                reads,
                copies,
            }
        })
        .collect()
}

/// `issues_here`: whether the training thread issues the reads on `I` (once the copy thread has
/// seen one of `I`'s reads pending after its first poll).
fn offload_matches_regions_step_by_step<I: Backend>(issues_here: bool) {
    type B<I> = Checkpointed<Autodiff<I>>;
    let _alone = super::alone();
    let device = Default::default();
    I::seed(&device, 5);
    let tokens =
        Tensor::<I, 2, Int>::random([4, 17], Distribution::Uniform(0.0, 64.0), &device).into_data();
    let kept = train::<B<I>>(Cut::Block, &tokens);
    let before = OffloadedBytes::now().in_use as usize;
    let offloaded = train::<B<I>>(Cut::BlockOffload, &tokens);
    assert_eq!(
        OffloadedBytes::now().in_use as usize,
        before,
        "every host copy released"
    );
    // With fusion, autotune picks a fused kernel per program, and a copy's read ends a fused
    // block where the regions without offload have none: the two programs may differ in the last
    // bits (`bench_kit::agreement`). There the offloaded runs under other bounds, one program,
    // are compared with the first offloaded run instead (a copy read before it finished would
    // differ between them); without fusion, offload must give the regions' own bits.
    let bitwise = Agreement::for_backend(&I::name(&device)) == Agreement::Bitwise;
    let reference = if bitwise { &kept } else { &offloaded };
    for (step, (kept, offloaded)) in kept.iter().zip(&offloaded).enumerate() {
        assert!(
            !bitwise || kept.params == offloaded.params,
            "step {step}: the parameters differ with offload"
        );
        assert_eq!(
            kept.reads, offloaded.reads,
            "step {step}: the training thread's device reads"
        );
        // Each block's input: [batch 4, 16 positions, width 32] floats.
        assert_eq!(
            offloaded.copies.copies, 4,
            "step {step}: {:?}",
            offloaded.copies
        );
        assert_eq!(offloaded.copies.bytes, 4 * COPY, "step {step}");
        assert_eq!(
            offloaded.copies.forward_waits, 0,
            "step {step}: {:?}",
            offloaded.copies
        );
        assert_eq!(kept.copies.copies, 0);
        assert!(kept.reads >= 1, "the loss is read");
        if !issues_here {
            assert_eq!(offloaded.copies.issued_here, 0, "step {step}");
        }
    }
    let last = &offloaded[STEPS - 1].copies;
    assert_eq!(
        last.issued_here,
        if issues_here { last.copies } else { 0 },
        "the last step: {last:?}"
    );
    eprintln!(
        "device reads per step {:?}; backward waits on copies per step {:?}",
        kept.iter().map(|s| s.reads).collect::<Vec<_>>(),
        offloaded
            .iter()
            .map(|s| s.copies.backward_waits)
            .collect::<Vec<_>>()
    );

    // A bound below one copy: a copy goes only when none is in flight (forward waits when the
    // one before has not arrived: how often depends on the copy thread's pace).
    set_in_flight_limit(1);
    let bounded = train::<B<I>>(Cut::BlockOffload, &tokens);
    set_in_flight_limit(0);
    let waited = train::<B<I>>(Cut::BlockOffload, &tokens);
    set_in_flight_limit(1 << 30);
    for (step, (kept, waited)) in kept.iter().zip(&waited).enumerate() {
        assert!(
            reference[step].params == waited.params,
            "step {step}: waited differs"
        );
        assert_eq!(
            waited.copies.forward_waits, waited.copies.copies,
            "step {step}: forward waits for every copy under a bound of 0"
        );
        assert_eq!(waited.copies.most_in_flight, COPY, "step {step}");
        assert_eq!(kept.reads, waited.reads, "step {step}: device reads");
    }
    for (step, (reference, bounded)) in reference.iter().zip(&bounded).enumerate() {
        assert!(
            reference.params == bounded.params,
            "step {step}: bounded differs"
        );
        assert_eq!(
            bounded.copies.most_in_flight, COPY,
            "step {step}: one copy at a time"
        );
    }
}

// On wgpu a copy's read is issued by the training thread (it returns before the copy is done).
bench_kit::backend_tests!(step_by_step: offload_matches_regions_step_by_step, [
    ndarray(false),
    wgpu(true),
    wgpu_unfused(true),
]);

/// Sets offload's bound on the bytes in flight (`0`: forward waits for each copy).
fn set_in_flight_limit(bytes: usize) {
    Settings {
        offload_in_flight_limit: bytes,
        ..Settings::current()
    }
    .apply();
}
