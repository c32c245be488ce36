//! A run saved as it trains (`--save DIR`) and resumed where it stopped (`--resume`), through
//! burn-train's own checkpointing: at each epoch's end burn-train hands the model, the
//! optimizer's state and the learning-rate schedule to [`Saving`]'s checkpointers, which write
//! them atomically under `DIR/METHOD/epoch-NNNN/` (app-kit's [`write_atomic`]), and once all
//! three are on disk `DIR/state.json` is replaced to name them, with their SHA-256 and what the
//! method's steps measured so far ([`Probed`]); the epoch it replaces is removed file by file.
//! A run stopped anywhere (a kill mid-write included) leaves the last complete epoch loadable.
//!
//! A resumed run gives what the uninterrupted run would have: the methods that finished are
//! read back (their rows, their weights), the one in progress restarts at its first epoch not
//! saved, with the same plan, the data loader advanced past the epochs done
//! ([`resumed_loader`]), and the generator reseeded at each epoch's start (the trainer does so
//! in every run): on the CPU the same losses and weights, bit for bit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};
use app_kit::save::{
    Checksums, STATE_FILE, SaveDir, SavedFiles, is_plain_file_name, sha256_hex, write_atomic,
};
use app_kit::table::{MethodRow, PlanPeaks};
use burn::data::dataloader::{DataLoader, DataLoaderIterator};
use burn::tensor::{Bytes, Device};
use burn::train::checkpoint::{
    Checkpoint, Checkpointer, CheckpointerError, CheckpointingAction, CheckpointingStrategy,
};
use burn::train::metric::store::EventStoreClient;
use burn_checkpoint_22::planner::{Base, Plan, Profile};
use serde::{Deserialize, Serialize};

use crate::classifier::{Probe, Probed};

/// The version of the layout written now.
pub const FORMAT: u32 = 1;

/// The files of a saved epoch, one per record burn-train checkpoints.
pub const RECORD_FILES: [&str; 3] = ["model.bpk", "optim.bpk", "scheduler.bpk"];

/// The settings that decide a run's results: a resumed run must give the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// `--model`.
    pub model: String,
    /// `--data`.
    pub data: String,
    /// `--text`.
    pub text: Option<PathBuf>,
    /// `--checkpoint`, the methods' names in order.
    pub checkpoint: Vec<String>,
    /// `--batch-size`.
    pub batch_size: usize,
    /// `--devices`, as the trainer resolved them.
    pub devices: String,
    /// `--epochs`.
    pub epochs: usize,
    /// `--lr`.
    pub lr: f64,
    /// `--momentum`.
    pub momentum: f64,
    /// `--weight-decay`.
    pub weight_decay: f64,
    /// `--depth` (DenseNet-BC).
    pub depth: usize,
    /// `--growth`.
    pub growth: usize,
    /// `--blocks` (the GPT).
    pub blocks: usize,
    /// `--d-model`.
    pub d_model: usize,
    /// `--heads`.
    pub heads: usize,
    /// `--context`.
    pub context: usize,
    /// `--dropout`.
    pub dropout: f64,
    /// `--seed`.
    pub seed: u64,
    /// `--limit`.
    pub limit: Option<usize>,
    /// `--valid-limit`.
    pub valid_limit: Option<usize>,
    /// `--memory-budget`, in bytes.
    pub memory_budget: Option<u64>,
}

/// What `state.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedRun {
    /// [`FORMAT`] when written.
    pub format: u32,
    /// The run's settings.
    pub settings: Settings,
    /// The methods begun, in the order they trained.
    pub methods: Vec<SavedMethod>,
}

/// One method of a saved run: finished (its row) or in progress (its last complete epoch).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedMethod {
    /// The method's name (`--checkpoint`'s word).
    pub method: String,
    /// Epochs complete.
    pub epochs_done: usize,
    /// The directory, relative to the save, of the last complete epoch's records (none before
    /// the first epoch's end).
    pub weights: Option<String>,
    /// The records' checksums.
    pub files: Checksums,
    /// What the method's steps measured up to that epoch's end.
    pub probed: Probed,
    /// The plan its steps run under and the base it runs on, where it was planned: a resumed
    /// method runs the same plan, not one planned again on other timings.
    pub plan: Option<SavedPlan>,
    /// The table's row, once the method finished.
    pub row: Option<MethodRow>,
}

/// A planned method's plan, its peaks and its base.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedPlan {
    /// The plan.
    pub plan: Plan,
    /// What it predicted and what its checked step peaked at.
    pub peaks: PlanPeaks,
    /// The autodiff it runs on.
    pub base: Base,
    /// The profile it was planned from: where a run on a device plans each step against the budget
    /// ([`Guard`](crate::budget::Guard)), the plans it chooses from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
}

impl SavedMethod {
    /// The records of its last complete epoch, with their checksums, in save `root`.
    pub fn records(&self, root: &Path) -> Option<SavedFiles> {
        self.weights.as_ref().map(|weights| SavedFiles {
            dir: root.join(weights),
            files: self.files.clone(),
        })
    }
}

/// The directory of `method`'s records after `epoch` epochs, relative to the save.
fn epoch_dir(method: &str, epoch: usize) -> String {
    format!("{method}/epoch-{epoch:04}")
}

/// Reads the run saved in `root` and checks it is this run (`settings`), every file it names a
/// plain name, and every method's last complete epoch whole (its checksums): a damaged record is
/// refused before any step, not found by burn-train's restore, which panics.
pub fn read(root: &Path, settings: &Settings) -> anyhow::Result<SavedRun> {
    let path = root.join(STATE_FILE);
    let json = std::fs::read(&path).with_context(|| {
        format!(
            "nothing to resume: cannot read {} (a run saved with --save {} writes it after its \
             first epoch)",
            path.display(),
            root.display()
        )
    })?;
    let run: SavedRun = serde_json::from_slice(&json)
        .with_context(|| format!("{} is not a run saved by train22", path.display()))?;
    if run.format != FORMAT {
        bail!(
            "{} has format {}, this trainer reads format {FORMAT}",
            path.display(),
            run.format
        );
    }
    let differences = app_kit::save::differences(settings, &run.settings);
    if !differences.is_empty() {
        bail!(
            "--resume: the settings differ from the run saved in {} (a resumed run must give \
             the results the uninterrupted one would have):\n  {}",
            root.display(),
            differences.join("\n  ")
        );
    }
    for method in &run.methods {
        let expected = epoch_dir(&method.method, method.epochs_done);
        let names_ok = method.files.keys().all(|name| is_plain_file_name(name));
        if method.weights.as_ref().is_some_and(|w| *w != expected) || !names_ok {
            bail!(
                "{} is not a run saved by train22: {}'s records are not where it saves them",
                path.display(),
                method.method
            );
        }
        if let Some(records) = method.records(root) {
            for name in RECORD_FILES {
                records.read(name)?;
            }
        }
    }
    Ok(run)
}

/// The run being saved: its state, the epochs whose records are being written, and the first
/// error a write met. Clones share it.
#[derive(Clone)]
pub struct Saving {
    state: Arc<Mutex<SavingState>>,
}

struct SavingState {
    root: PathBuf,
    run: SavedRun,
    /// The method training now: its index in `run.methods`.
    current: usize,
    /// Epochs ended whose records are not all on disk yet: what the steps measured at the
    /// epoch's end and the records written so far.
    pending: BTreeMap<usize, (Probed, Checksums)>,
    error: Option<String>,
}

impl Saving {
    /// Saves `run` (a new one, or the one read back to resume) in `save`.
    pub fn new(save: &SaveDir, run: SavedRun) -> Self {
        Saving {
            state: Arc::new(Mutex::new(SavingState {
                root: save.root().to_path_buf(),
                run,
                current: 0,
                pending: BTreeMap::new(),
                error: None,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SavingState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the save holds of `method`, if it was begun.
    pub fn saved(&self, method: &str) -> Option<SavedMethod> {
        let state = self.lock();
        state
            .run
            .methods
            .iter()
            .find(|m| m.method == method)
            .cloned()
    }

    /// The save's directory.
    pub fn root(&self) -> PathBuf {
        self.lock().root.clone()
    }

    /// Makes `method` the one training now (begun with `plan`, if not already in the save).
    pub fn begin(&self, method: &str, plan: Option<SavedPlan>) {
        let mut state = self.lock();
        state.pending.clear();
        state.current = match state.run.methods.iter().position(|m| m.method == method) {
            Some(index) => index,
            None => {
                state.run.methods.push(SavedMethod {
                    method: method.to_string(),
                    epochs_done: 0,
                    weights: None,
                    files: Checksums::new(),
                    probed: Probed::default(),
                    plan,
                    row: None,
                });
                state.run.methods.len() - 1
            }
        };
    }

    /// The method training now finished with `row`, its pools having reserved at most
    /// `run_reserved` bytes since it (re)started ([`Probed::run_reserved`]): saved as a result.
    pub fn finish(&self, row: &MethodRow, run_reserved: Option<u64>) -> anyhow::Result<()> {
        self.take_error()?;
        let mut state = self.lock();
        let current = state.current;
        let method = &mut state.run.methods[current];
        method.row = Some(row.clone());
        method.probed.run_reserved = method.probed.run_reserved.max(run_reserved);
        state.write()
    }

    /// The first error a checkpointer met writing an epoch, taken.
    pub fn take_error(&self) -> anyhow::Result<()> {
        match self.lock().error.take() {
            Some(error) => bail!("saving the run: {error}"),
            None => Ok(()),
        }
    }

    /// burn-train's checkpointers for the method training now (the model's, the optimizer's,
    /// the schedule's) and the strategy that saves every epoch with `probe`'s figures.
    pub fn checkpointers(&self, probe: Probe) -> ([SaveRecord; 3], SaveEveryEpoch) {
        let record = |index| SaveRecord {
            saving: self.clone(),
            name: RECORD_FILES[index],
        };
        let strategy = SaveEveryEpoch {
            saving: self.clone(),
            probe,
        };
        ([record(0), record(1), record(2)], strategy)
    }

    /// Epoch `epoch` ended with the method's steps having measured `probed`.
    fn epoch_ended(&self, epoch: usize, probed: Probed) {
        self.lock()
            .pending
            .insert(epoch, (probed, Checksums::new()));
    }

    /// The record `name` of epoch `epoch` is on disk with checksum `sha`: the epoch is
    /// committed once its three are.
    fn saved_record(&self, epoch: usize, name: &str, sha: String) -> anyhow::Result<()> {
        let mut state = self.lock();
        let complete = match state.pending.get_mut(&epoch) {
            Some((_, files)) => {
                files.insert(name.to_string(), sha);
                files.len() == RECORD_FILES.len()
            }
            None => bail!("epoch {epoch}'s {name} came before the epoch ended"),
        };
        if complete {
            let (probed, files) = state.pending.remove(&epoch).expect("pending");
            let current = state.current;
            let method = &mut state.run.methods[current];
            let previous = method.weights.take().map(|w| (w, method.files.clone()));
            method.epochs_done = epoch;
            method.weights = Some(epoch_dir(&method.method, epoch));
            method.files = files;
            method.probed = probed;
            state.write()?;
            // The new state is committed: the epoch it replaces can go, file by file, so that
            // nothing a user put there is touched.
            if let Some((weights, files)) = previous {
                let dir = state.root.join(weights);
                for name in files.keys() {
                    let _ = std::fs::remove_file(dir.join(name));
                }
                let _ = std::fs::remove_dir(&dir);
            }
        }
        Ok(())
    }

    fn fail(&self, error: String) {
        self.lock().error.get_or_insert(error);
    }

    fn records(&self, epoch: usize) -> SavedFiles {
        let state = self.lock();
        let method = &state.run.methods[state.current];
        SavedFiles {
            dir: state.root.join(epoch_dir(&method.method, epoch)),
            files: if method.epochs_done == epoch {
                method.files.clone()
            } else {
                Checksums::new()
            },
        }
    }
}

impl SavingState {
    fn write(&self) -> anyhow::Result<()> {
        let json = serde_json::to_vec_pretty(&self.run).context("the state serialises")?;
        write_atomic(&self.root.join(STATE_FILE), &json)
    }
}

/// burn-train's checkpointer of one record (the model, the optimizer's state, the schedule):
/// written atomically into the epoch's directory, read back checked against its checksum.
pub struct SaveRecord {
    saving: Saving,
    name: &'static str,
}

impl<R: Checkpoint> Checkpointer<R> for SaveRecord {
    fn save(&self, epoch: usize, record: R) -> Result<(), CheckpointerError> {
        let write = || -> anyhow::Result<()> {
            let bytes = record
                .checkpoint_into_bytes()
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let dir = self.saving.records(epoch).dir;
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            write_atomic(&dir.join(self.name), &bytes)?;
            self.saving
                .saved_record(epoch, self.name, sha256_hex(&bytes))
        };
        // burn-train's checkpointers run on threads of their own and panic on an error: the
        // error is kept, and the trainer fails the run with it when the method ends.
        if let Err(error) = write() {
            self.saving.fail(format!("{error:#}"));
        }
        Ok(())
    }

    fn restore(&self, epoch: usize) -> Result<R, CheckpointerError> {
        let bytes = self
            .saving
            .records(epoch)
            .read(self.name)
            .map_err(|e| CheckpointerError::Unknown(format!("{e:#}")))?;
        R::checkpoint_from_bytes(Bytes::from_bytes_vec(bytes)).map_err(CheckpointerError::Record)
    }

    /// Nothing: the state's commit removes the epoch it replaces.
    fn delete(&self, _epoch: usize) -> Result<(), CheckpointerError> {
        Ok(())
    }
}

/// burn-train's checkpointing strategy for a saved run: every epoch saved, what the steps
/// measured taken at its end (on the training thread, before the next epoch's steps).
pub struct SaveEveryEpoch {
    saving: Saving,
    probe: Probe,
}

impl CheckpointingStrategy for SaveEveryEpoch {
    fn checkpointing(&mut self, epoch: usize, _: &EventStoreClient) -> Vec<CheckpointingAction> {
        self.saving.epoch_ended(epoch, self.probe.probed());
        vec![CheckpointingAction::Save]
    }
}

/// `loader` advanced past `epochs` epochs for a resumed method: its shuffles are those the
/// uninterrupted run's later epochs would have. Burn's loader draws an epoch's order from its
/// generator when an epoch's iterator is made (and each device's copy from a fork of it): every
/// copy skips the orders of the epochs done.
pub fn resumed_loader<O: 'static>(
    loader: Arc<dyn DataLoader<O>>,
    epochs: usize,
) -> Arc<dyn DataLoader<O>> {
    Arc::new(Resumed {
        loader,
        skip: AtomicUsize::new(epochs),
    })
}

struct Resumed<O> {
    loader: Arc<dyn DataLoader<O>>,
    /// Epochs' orders still to skip.
    skip: AtomicUsize,
}

impl<O: 'static> DataLoader<O> for Resumed<O> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<O> + 'a> {
        for _ in 0..self.skip.swap(0, Ordering::Relaxed) {
            drop(self.loader.iter());
        }
        self.loader.iter()
    }

    fn num_items(&self) -> usize {
        self.loader.num_items()
    }

    fn to_device(&self, device: &Device) -> Arc<dyn DataLoader<O>> {
        resumed_loader(
            self.loader.to_device(device),
            self.skip.load(Ordering::Relaxed),
        )
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<O>> {
        resumed_loader(
            self.loader.slice(start, end),
            self.skip.load(Ordering::Relaxed),
        )
    }
}
