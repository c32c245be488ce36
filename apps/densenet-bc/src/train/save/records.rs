//! A saved epoch's records: the model and the optimizer state, written with Burn's recorder
//! (named fields, full precision) and read back checked against their checksums and against the
//! network this run's settings build.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Once;

use anyhow::Context;
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::Optimizer;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
use burn::tensor::Tensor;
use burn::tensor::backend::{AutodiffBackend, Backend};

use crate::DenseNet;
use app_kit::save::{Checksums, SavedFiles, sha256_hex, write_atomic};

/// The model's file in a saved epoch's directory.
pub const MODEL_FILE: &str = "model.mpk";
/// The optimizer state's file in a saved epoch's directory.
pub const OPTIMIZER_FILE: &str = "optimizer.mpk";

/// The recorder of saved states: named fields (readable by other tools), full precision (a
/// resumed run must continue from the exact bits).
pub fn recorder() -> NamedMpkBytesRecorder<FullPrecisionSettings> {
    NamedMpkBytesRecorder::default()
}

/// `model` and `optimizer` with the weights and the optimizer state saved by
/// [`StepRunner::save`](crate::train::StepRunner::save) in `saved`: each file checked against its
/// checksum, and every tensor of the loaded model against the shape `model` (built from this run's
/// settings) gives it.
pub fn restore_weights<B, O>(
    model: DenseNet<B>,
    optimizer: O,
    saved: &SavedFiles,
    device: &B::Device,
) -> anyhow::Result<(DenseNet<B>, O)>
where
    B: AutodiffBackend,
    O: Optimizer<DenseNet<B>, B>,
{
    let model_path = saved.dir.join(MODEL_FILE);
    let optimizer_path = saved.dir.join(OPTIMIZER_FILE);
    let model_record = recorder()
        .load(saved.read(MODEL_FILE)?, device)
        .with_context(|| format!("{} is not a saved DenseNet-BC", model_path.display()))?;
    let optimizer_record = recorder()
        .load(saved.read(OPTIMIZER_FILE)?, device)
        .with_context(|| format!("{} is not a saved SGD state", optimizer_path.display()))?;
    let expected = tensor_shapes(&model);
    // Burn asserts (panics) where a record's structure differs from the module's, e.g. a
    // dense block with another number of layers: that is a wrong file, reported as one.
    let loaded = quietly(|| model.load_record(model_record))
        .map_err(|_| not_these_settings(&model_path, "its layers differ from this network's"))?;
    let found = tensor_shapes(&loaded);
    if let Some(((path, want), (_, got))) = expected.iter().zip(&found).find(|(e, f)| e != f) {
        return Err(not_these_settings(
            &model_path,
            &format!("{path} has shape {got:?}, this network's is {want:?}"),
        ));
    }
    if expected.len() != found.len() {
        return Err(not_these_settings(
            &model_path,
            &format!(
                "it holds {} tensors, this network {}",
                found.len(),
                expected.len()
            ),
        ));
    }
    let optimizer = quietly(|| optimizer.load_record(optimizer_record)).map_err(|_| {
        anyhow::anyhow!(
            "{} does not fit this network's parameters",
            optimizer_path.display()
        )
    })?;
    Ok((loaded, optimizer))
}

/// Runs `f`, turning a panic into `Err` without the panic message on standard error (the caller
/// reports it as an error of its own).
///
/// The process's panic hook is wrapped once, and stays silent only for a thread inside
/// `quietly`: swapping the hook around `f` instead would silence other threads' panics meanwhile,
/// and two threads doing it at once could leave the silent hook installed.
fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, ()> {
    thread_local! {
        static QUIET: Cell<bool> = const { Cell::new(false) };
    }
    static WRAP_HOOK: Once = Once::new();
    WRAP_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    let was_quiet = QUIET.with(|quiet| quiet.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|quiet| quiet.set(was_quiet));
    result.map_err(drop)
}

fn not_these_settings(path: &Path, why: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{} is not a DenseNet-BC of this run's settings (--depth, --growth-rate, the data's \
         channels and classes): {why}",
        path.display()
    )
}

/// Every float tensor of `model` (parameters and BatchNorm statistics), by module path, with
/// its shape, in the module's order.
pub fn tensor_shapes<B: Backend>(model: &DenseNet<B>) -> Vec<(String, Vec<usize>)> {
    #[derive(Default)]
    struct Shapes {
        path: Vec<String>,
        found: Vec<(String, Vec<usize>)>,
    }
    impl<B: Backend> ModuleVisitor<B> for Shapes {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.found
                .push((self.path.join("."), param.lazy_shape().to_vec()));
        }
    }
    let mut shapes = Shapes::default();
    model.visit(&mut shapes);
    shapes.found
}

/// Writes `model` ([`MODEL_FILE`]) and `optimizer`'s state ([`OPTIMIZER_FILE`]) into `dir`, each
/// file atomically, and returns their checksums.
pub fn save_state<B, O>(model: DenseNet<B>, optimizer: &O, dir: &Path) -> anyhow::Result<Checksums>
where
    B: AutodiffBackend,
    O: Optimizer<DenseNet<B>, B>,
{
    let model = recorder()
        .record(model.into_record(), ())
        .context("cannot serialise the model")?;
    let optimizer = recorder()
        .record(optimizer.to_record(), ())
        .context("cannot serialise the optimizer state")?;
    let mut files = Checksums::new();
    for (name, bytes) in [(MODEL_FILE, model), (OPTIMIZER_FILE, optimizer)] {
        write_atomic(&dir.join(name), &bytes)?;
        files.insert(name.to_string(), sha256_hex(&bytes));
    }
    Ok(files)
}
