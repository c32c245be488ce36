//! Saved runs: after each epoch, the model and optimizer state go into a directory of their own
//! (`epoch-0003/model.mpk`, `epoch-0003/optimizer.mpk`), then `state.json` is replaced to point
//! at it. Each file is written to a temporary name, flushed to disk and renamed over the old one,
//! and `state.json` is written last: a save interrupted at any point (a crash, a kill, a full
//! disk) leaves the previous `state.json` naming the previous, complete epoch.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::report::EpochReport;

/// The file that names the last complete epoch.
pub const STATE_FILE: &str = "state.json";
/// The version of the saved layout, checked on resume.
pub const FORMAT: u32 = 1;

/// Writes `bytes` to `path` atomically: a temporary file next to it, flushed, renamed over
/// `path`, and the directory flushed so the rename itself survives a power loss.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .context("a file path has a parent directory")?;
    let mut temp_name = path
        .file_name()
        .context("a file path has a file name")?
        .to_os_string();
    temp_name.push(".tmp");
    let temp = dir.join(temp_name);
    let write = || -> std::io::Result<()> {
        let mut file = File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    };
    write().with_context(|| format!("cannot write {}", temp.display()))?;
    std::fs::rename(&temp, path)
        .with_context(|| format!("cannot rename {} to {}", temp.display(), path.display()))?;
    // Not every platform can open a directory to flush it; the rename is done either way.
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

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
    /// The settings that differ from `saved`, as `--flag now (saved: before)` lines.
    pub fn differences(&self, saved: &RunSettings) -> Vec<String> {
        let now = serde_json::to_value(self).expect("settings serialise");
        let before = serde_json::to_value(saved).expect("settings serialise");
        let (now, before) = (now.as_object().unwrap(), before.as_object().unwrap());
        now.iter()
            .filter(|(key, value)| before.get(*key) != Some(*value))
            .map(|(key, value)| {
                format!(
                    "--{} {value} (saved run: {})",
                    key.replace('_', "-"),
                    before.get(key).unwrap_or(&serde_json::Value::Null)
                )
            })
            .collect()
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
    /// The run's settings.
    pub settings: RunSettings,
    /// The figures of every complete epoch.
    pub history: Vec<EpochReport>,
}

/// The directory for the weights after `epochs_done` epochs.
pub fn epoch_dir_name(epochs_done: usize) -> String {
    format!("epoch-{epochs_done:04}")
}

/// Saves an epoch under `root`: `write_weights` fills the epoch's directory, then
/// [`STATE_FILE`] is replaced to point at it, then older epochs' directories are removed.
pub fn save_epoch(
    root: &Path,
    state: &SavedState,
    write_weights: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let weights = root.join(&state.weights);
    std::fs::create_dir_all(&weights)
        .with_context(|| format!("cannot create {}", weights.display()))?;
    write_weights(&weights)?;
    let json = serde_json::to_vec_pretty(state).context("the state serialises")?;
    write_atomic(&root.join(STATE_FILE), &json)?;
    // The new state is committed: earlier epochs, and leftovers of interrupted saves, can go.
    for entry in std::fs::read_dir(root)?.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("epoch-") && name != state.weights.as_str() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    Ok(())
}

/// The state saved in `root` and the directory of its weights.
pub fn load_state(root: &Path) -> anyhow::Result<(SavedState, PathBuf)> {
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
    if state.format != FORMAT {
        bail!(
            "{} has format {}, this trainer reads format {FORMAT}",
            path.display(),
            state.format
        );
    }
    let weights = root.join(&state.weights);
    Ok((state, weights))
}
