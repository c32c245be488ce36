//! Every checkpoint cut of the GPT model (burn-nn attention with a causal mask, LayerNorm, GELU
//! MLP, dropout) gives the loss and every parameter gradient of plain `Autodiff` on the same
//! weights, tokens and dropout masks; regions that span many blocks are recomputed by a walk that
//! visits each op once. On NdArray, and on a cubecl runtime: Burn's wgpu backend with and without
//! fusion (on Mesa's lavapipe in CI, see `bench_kit::wgpu`). Bit for bit, except with fusion,
//! where autotune picks kernels per fused program and the two programs agree within float
//! reassociation (`bench_kit::agreement`); there the program with regions must give its own bits
//! again.

use bench_kit::agreement::Agreement;
use burn::backend::Autodiff;
use burn::module::{Module, ModuleVisitor, Param};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use burn_checkpoint::Checkpointed;
use burn_checkpoint::counters::Counters;
use gpt::{Cut, Gpt, GptConfig};

fn config(dropout: f64) -> GptConfig {
    GptConfig::new(48, 16, 6, 2, 12).with_dropout(dropout)
}

/// The loss and the gradient of every parameter, in the module's order.
fn run<B: AutodiffBackend>(
    weights: &[u8],
    cut: Cut,
    dropout: f64,
    tokens: &TensorData,
) -> Vec<Vec<f32>> {
    let device = Default::default();
    let record = BinBytesRecorder::<FullPrecisionSettings>::default()
        .load(weights.to_vec(), &device)
        .unwrap();
    let model: Gpt<B> = config(dropout)
        .init(&device)
        .load_record(record)
        .with_cut(cut);
    let tokens = Tensor::<B, 2, Int>::from_data(tokens.clone(), &device);
    let [batch, seq] = tokens.dims();
    let inputs = tokens.clone().slice([0..batch, 0..seq - 1]);
    let targets = tokens.slice([0..batch, 1..seq]);
    B::seed(&device, 7);
    let loss = model.loss(inputs, targets);
    let grads = loss.backward();
    struct Collect<'a, B: AutodiffBackend>(&'a B::Gradients, Vec<Vec<f32>>);
    impl<B: AutodiffBackend> ModuleVisitor<B> for Collect<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let grad = param
                .val()
                .grad(self.0)
                .expect("every parameter has a gradient");
            self.1.push(grad.into_data().to_vec::<f32>().unwrap());
        }
    }
    let mut collect = Collect::<B>(&grads, vec![loss.into_data().to_vec::<f32>().unwrap()]);
    model.visit(&mut collect);
    collect.1
}

bench_kit::backend_tests!(every_cut: every_cut_gives_the_plain_gradients, [
    ndarray,
    wgpu,
    wgpu_unfused,
    cuda,
]);

fn every_cut_gives_the_plain_gradients<I: Backend>() {
    type Plain<I> = Autodiff<I>;
    let _alone = super::alone();
    let device = Default::default();
    let agreement = Agreement::for_backend(&I::name(&device));
    for dropout in [0.0, 0.1] {
        I::seed(&device, 1);
        let weights = BinBytesRecorder::<FullPrecisionSettings>::default()
            .record(config(dropout).init::<Plain<I>>(&device).into_record(), ())
            .unwrap();
        let tokens =
            Tensor::<I, 2, Int>::random([3, 13], Distribution::Uniform(0.0, 48.0), &device)
                .into_data();
        let plain = run::<Plain<I>>(&weights, Cut::None, dropout, &tokens);
        // The loss, the embeddings, 6 blocks of at least 12 tensors, the head.
        assert!(plain.len() > 1 + 2 + 6 * 12, "{} values", plain.len());
        for cut in [
            Cut::None,
            Cut::Block,
            Cut::BlockSave,
            Cut::BlockKeepAttention,
            Cut::BlockOffload,
            Cut::SeqSqrt,
            Cut::SeqTwo,
            Cut::Whole,
        ] {
            Counters::reset();
            let ckpt = run::<Checkpointed<Autodiff<I>>>(&weights, cut, dropout, &tokens);
            if let Err(difference) = agreement.check(&ckpt, &plain) {
                panic!("{cut:?}, dropout {dropout}: loss or gradients differ: {difference}");
            }
            // Where kernels are picked per program, the program with regions must still give
            // its own bits again, once tuned: a race would not.
            if agreement == Agreement::Reassociation && cut == Cut::Block {
                let again = run::<Checkpointed<Autodiff<I>>>(&weights, cut, dropout, &tokens);
                if let Err(difference) = Agreement::Bitwise.check(&again, &ckpt) {
                    panic!(
                        "{cut:?}, dropout {dropout}: a second run against the first: {difference}"
                    );
                }
            }
            let recomputed: u64 = Counters::now().recomputes.values().sum();
            assert_eq!(Counters::now().walk_steps, recomputed, "{cut:?}");
            assert_eq!(recomputed > 0, cut != Cut::None, "{cut:?}: {recomputed}");
            assert!(
                Counters::now().fallbacks.is_empty(),
                "{:?}",
                Counters::now().fallbacks
            );
        }
    }
}
