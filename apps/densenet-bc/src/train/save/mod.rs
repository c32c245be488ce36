//! Saved runs: after each epoch, the model and optimizer state go into a directory of their own
//! (`epoch-0003/model.mpk`, `epoch-0003/optimizer.mpk`), then `state.json` is replaced to point
//! at it, with the SHA-256 of each file. Each file is written to a temporary name, flushed to disk
//! and renamed over the old one, and `state.json` is written last: a save interrupted at any point
//! (a crash, a kill, a full disk) leaves the previous `state.json` naming the previous, complete
//! epoch. Only what the trainer wrote is ever removed: the previous epoch's files, by the names
//! its `state.json` lists.

use std::path::Path;

use anyhow::{Context, bail};
use app_kit::save::{Checksums, STATE_FILE, SavedFiles, is_plain_file_name, write_atomic};
use serde::{Deserialize, Serialize};

use super::report::EpochReport;

mod records;

pub use records::{
    MODEL_FILE, OPTIMIZER_FILE, recorder, restore_weights, save_state, tensor_shapes,
};

/// The version of the saved layout written now: 2 lists each weight file's SHA-256. Format 1
/// (no checksums) is still read.
pub const FORMAT: u32 = 2;

/// The settings that decide a run's results: a resumed run must use the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// `--data`.
    pub data: String,
    /// `--depth`.
    pub depth: usize,
    /// `--growth-rate`.
    pub growth_rate: usize,
    /// `--batch-size`.
    pub batch_size: usize,
    /// `--epochs` (the learning-rate schedule depends on it).
    pub epochs: usize,
    /// `--lr`.
    pub lr: f64,
    /// `--momentum`.
    pub momentum: f64,
    /// `--weight-decay`.
    pub weight_decay: f64,
    /// `--seed`.
    pub seed: u64,
    /// `--limit`.
    pub limit: Option<usize>,
    /// `--valid-limit`.
    pub valid_limit: Option<usize>,
}

impl RunSettings {
    /// The settings that differ from `saved`, as `--flag now (saved run: before)` lines.
    pub fn differences(&self, saved: &RunSettings) -> Vec<String> {
        app_kit::save::differences(self, saved)
    }
}

/// What `state.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedState {
    /// [`FORMAT`] when written.
    pub format: u32,
    /// Epochs complete.
    pub epochs_done: usize,
    /// The directory, relative to the save directory, holding the model and optimizer files.
    pub weights: String,
    /// The files in `weights` and their checksums (empty in format 1).
    #[serde(default)]
    pub files: Checksums,
    /// The run's settings.
    pub settings: RunSettings,
    /// The figures of every complete epoch.
    pub history: Vec<EpochReport>,
}

/// The directory for the weights after `epochs_done` epochs.
pub fn epoch_dir_name(epochs_done: usize) -> String {
    format!("epoch-{epochs_done:04}")
}

/// Saves an epoch under `root`: `write_weights` fills the epoch's directory and returns the
/// checksums of what it wrote, then [`STATE_FILE`] is replaced to point at it, then the files
/// `previous` (the state this save replaces) lists are removed, and its directory if nothing
/// else is in it.
pub fn save_epoch(
    root: &Path,
    mut state: SavedState,
    previous: Option<&SavedState>,
    write_weights: impl FnOnce(&Path) -> anyhow::Result<Checksums>,
) -> anyhow::Result<SavedState> {
    let weights = root.join(&state.weights);
    std::fs::create_dir_all(&weights)
        .with_context(|| format!("cannot create {}", weights.display()))?;
    state.files = write_weights(&weights)?;
    let json = serde_json::to_vec_pretty(&state).context("the state serialises")?;
    write_atomic(&root.join(STATE_FILE), &json)?;
    // The new state is committed: the epoch it replaces can go, file by file, so that nothing
    // a user put there is touched.
    if let Some(previous) = previous.filter(|p| p.weights != state.weights) {
        let dir = root.join(&previous.weights);
        for name in previous.files.keys() {
            let _ = std::fs::remove_file(dir.join(name));
        }
        let _ = std::fs::remove_dir(&dir);
    }
    Ok(state)
}

/// The state saved in `root` and its weights.
pub fn read_state(root: &Path) -> anyhow::Result<(SavedState, SavedFiles)> {
    let path = root.join(STATE_FILE);
    let json = std::fs::read(&path).with_context(|| {
        format!(
            "nothing to resume: cannot read {} (a run saved with --save {} writes it after its first epoch)",
            path.display(),
            root.display()
        )
    })?;
    let state: SavedState = serde_json::from_slice(&json)
        .with_context(|| format!("{} is not a saved training state", path.display()))?;
    if !(1..=FORMAT).contains(&state.format) {
        bail!(
            "{} has format {}, this trainer reads formats 1 to {FORMAT}",
            path.display(),
            state.format
        );
    }
    if state.weights != epoch_dir_name(state.epochs_done) {
        bail!(
            "{} is not a saved training state: it names {} for epoch {}",
            path.display(),
            state.weights,
            state.epochs_done
        );
    }
    if let Some(name) = state.files.keys().find(|name| !is_plain_file_name(name)) {
        bail!(
            "{} is not a saved training state: it lists `{name}`, not a file name",
            path.display()
        );
    }
    let weights = SavedFiles {
        dir: root.join(&state.weights),
        files: state.files.clone(),
    };
    Ok((state, weights))
}
