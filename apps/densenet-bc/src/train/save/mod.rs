//! Saved runs: after each epoch, the model and optimizer state go into a directory of their own
//! (`epoch-0003/model.mpk`, `epoch-0003/optimizer.mpk`), then `state.json` is replaced to point
//! at it, with the SHA-256 of each file. Each file is written to a temporary name, flushed to disk
//! and renamed over the old one, and `state.json` is written last: a save interrupted at any point
//! (a crash, a kill, a full disk) leaves the previous `state.json` naming the previous, complete
//! epoch. Only what the trainer wrote is ever removed: the previous epoch's files, by the names
//! its `state.json` lists.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::report::EpochReport;

mod records;

pub use records::{
    MODEL_FILE, OPTIMIZER_FILE, recorder, restore_weights, save_state, tensor_shapes,
};

/// The file that names the last complete epoch.
pub const STATE_FILE: &str = "state.json";
/// The version of the saved layout written now: 2 lists each weight file's SHA-256. Format 1
/// (no checksums) is still read.
pub const FORMAT: u32 = 2;

/// Writes `bytes` to `path` atomically: a temporary file next to it, flushed, renamed over
/// `path`, and the directory flushed so the rename itself survives a power loss.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let temp = temp_path(path)?;
    let write = || -> std::io::Result<()> {
        let mut file = File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    };
    write().with_context(|| format!("cannot write {}", temp.display()))?;
    commit(&temp, path)
}

/// Where [`write_atomic`] writes `path`'s bytes before renaming them over it: `NAME.tmp`.
pub fn temp_path(path: &Path) -> anyhow::Result<PathBuf> {
    let mut temp_name = path
        .file_name()
        .context("a file path has a file name")?
        .to_os_string();
    temp_name.push(".tmp");
    Ok(path.with_file_name(temp_name))
}

/// Renames the flushed `temp` over `path` and flushes the directory, so the rename itself
/// survives a power loss.
pub fn commit(temp: &Path, path: &Path) -> anyhow::Result<()> {
    std::fs::rename(temp, path)
        .with_context(|| format!("cannot rename {} to {}", temp.display(), path.display()))?;
    // Not every platform can open a directory to flush it; the rename is done either way.
    if let Some(dir) = path.parent()
        && let Ok(dir) = File::open(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// The files of a saved epoch: name in the epoch's directory → SHA-256 of its bytes, in hex.
pub type Checksums = BTreeMap<String, String>;

/// Whether `name` names a file in a directory, not a path leading elsewhere.
fn is_plain_file_name(name: &str) -> bool {
    let mut parts = Path::new(name).components();
    matches!(
        (parts.next(), parts.next()),
        (Some(std::path::Component::Normal(_)), None)
    )
}

/// The SHA-256 of `bytes`, in lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
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

/// A saved epoch's directory and the checksums its files must match.
#[derive(Debug, Clone)]
pub struct SavedWeights {
    /// The epoch's directory.
    pub dir: PathBuf,
    /// The checksums `state.json` lists (none for format 1).
    pub files: Checksums,
}

impl SavedWeights {
    /// The bytes of the file `name`, checked against its checksum.
    pub fn read(&self, name: &str) -> anyhow::Result<Vec<u8>> {
        let path = self.dir.join(name);
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        match self.files.get(name) {
            Some(expected) if *expected != sha256_hex(&bytes) => bail!(
                "{} was changed or damaged after it was saved: its SHA-256 is not the one {STATE_FILE} \
                 holds for it ({} bytes now); the run cannot resume from it",
                path.display(),
                bytes.len()
            ),
            Some(_) => Ok(bytes),
            None if self.files.is_empty() => Ok(bytes),
            None => bail!(
                "{STATE_FILE} lists no checksum for {}: it is not a file this trainer saved",
                path.display()
            ),
        }
    }
}

/// The state saved in `root` and its weights.
pub fn read_state(root: &Path) -> anyhow::Result<(SavedState, SavedWeights)> {
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
    let weights = SavedWeights {
        dir: root.join(&state.weights),
        files: state.files.clone(),
    };
    Ok((state, weights))
}
