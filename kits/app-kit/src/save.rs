//! A run saved to disk so that it survives being stopped, as both trainers save theirs
//! (`--save DIR`, `--resume`): files written atomically ([`write_atomic`]: a temporary name,
//! flushed, renamed), each saved file's SHA-256 kept in the run's [`STATE_FILE`] (written last,
//! so a save interrupted at any point leaves the previous one whole) and checked when it is read
//! back ([`SavedFiles::read`]), and the directory claimed by one run at a time ([`SaveDir`]).
//! Only what a trainer wrote is ever removed.
//!
//! ```
//! use app_kit::save::{SavedFiles, sha256_hex, write_atomic};
//!
//! let dir = tempfile::tempdir().unwrap();
//! write_atomic(&dir.path().join("model.bin"), b"weights").unwrap();
//! let saved = SavedFiles {
//!     dir: dir.path().to_path_buf(),
//!     files: [("model.bin".to_string(), sha256_hex(b"weights"))].into(),
//! };
//! assert_eq!(saved.read("model.bin").unwrap(), b"weights");
//! std::fs::write(dir.path().join("model.bin"), b"changed").unwrap();
//! assert!(saved.read("model.bin").is_err());
//! ```

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Write};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// The file that names a save's last complete epoch, written last.
pub const STATE_FILE: &str = "state.json";

/// The lock file of a save directory: locked (an OS file lock, released when the process ends,
/// however it ends) by the run that saves there; it holds that run's process id.
pub const LOCK_FILE: &str = "train.lock";

/// Writes `bytes` to `path` atomically: a temporary file next to it ([`temp_path`]), flushed,
/// renamed over `path`, and the directory flushed so the rename itself survives a power loss.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("rows.json");
/// app_kit::save::write_atomic(&path, b"[]").unwrap();
/// assert_eq!(std::fs::read(&path).unwrap(), b"[]");
/// ```
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
///
/// ```
/// use std::path::Path;
///
/// let temp = app_kit::save::temp_path(Path::new("run/state.json")).unwrap();
/// assert_eq!(temp, Path::new("run/state.json.tmp"));
/// ```
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
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let (temp, path) = (dir.path().join("a.tmp"), dir.path().join("a"));
/// std::fs::write(&temp, b"x").unwrap();
/// app_kit::save::commit(&temp, &path).unwrap();
/// assert!(path.exists() && !temp.exists());
/// ```
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

/// Whether `name` names a file in a directory, not a path leading elsewhere: a state file that
/// lists another is refused, so a damaged or hand-made one cannot make a trainer read or remove
/// files outside its save.
///
/// ```
/// use app_kit::save::is_plain_file_name;
///
/// assert!(is_plain_file_name("model.mpk"));
/// assert!(!is_plain_file_name("../model.mpk") && !is_plain_file_name("/etc/passwd"));
/// ```
pub fn is_plain_file_name(name: &str) -> bool {
    let mut parts = Path::new(name).components();
    matches!(
        (parts.next(), parts.next()),
        (Some(Component::Normal(_)), None)
    )
}

/// The SHA-256 of `bytes`, in lowercase hex.
///
/// ```
/// assert!(app_kit::save::sha256_hex(b"").starts_with("e3b0c442"));
/// ```
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The settings of `now` that differ from `saved` (two values of one serialisable type, the
/// settings a resumed run must share with the saved one), as `--flag now (saved run: before)`.
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Settings {
///     batch_size: usize,
///     seed: u64,
/// }
///
/// let now = Settings { batch_size: 32, seed: 1 };
/// let saved = Settings { batch_size: 64, seed: 1 };
/// let said = app_kit::save::differences(&now, &saved);
/// assert_eq!(said, ["--batch-size 32 (saved run: 64)"]);
/// ```
pub fn differences(now: &impl Serialize, saved: &impl Serialize) -> Vec<String> {
    let now = serde_json::to_value(now).expect("settings serialise");
    let before = serde_json::to_value(saved).expect("settings serialise");
    let empty = serde_json::Map::new();
    let (now, before) = (
        now.as_object().unwrap_or(&empty),
        before.as_object().unwrap_or(&empty),
    );
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

/// A saved epoch's directory and the checksums its files must match.
#[derive(Debug, Clone)]
pub struct SavedFiles {
    /// The epoch's directory.
    pub dir: PathBuf,
    /// The checksums the state file lists (none in a format without them: nothing checked).
    pub files: Checksums,
}

impl SavedFiles {
    /// The bytes of the file `name`, checked against its checksum: a changed or damaged file,
    /// or one the state does not list, is an error that says so.
    pub fn read(&self, name: &str) -> anyhow::Result<Vec<u8>> {
        let path = self.dir.join(name);
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        match self.files.get(name) {
            Some(expected) if *expected != sha256_hex(&bytes) => bail!(
                "{} was changed or damaged after it was saved: its SHA-256 is not the one \
                 {STATE_FILE} holds for it ({} bytes now); the run cannot resume from it",
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

/// A save directory claimed by this run: it is a directory, holds nothing but a save of this
/// trainer, is writable, and no other run saves there while this value lives.
///
/// ```
/// use app_kit::save::SaveDir;
///
/// let dir = tempfile::tempdir().unwrap();
/// let root = dir.path().join("run");
/// let claimed = SaveDir::claim(&root, false).unwrap();
/// let second = SaveDir::claim(&root, false).unwrap_err();
/// assert!(format!("{second:#}").contains("another train run is saving there"), "{second:#}");
/// drop(claimed);
/// assert!(!root.exists(), "a directory the run created and saved nothing in goes again");
/// ```
#[derive(Debug)]
pub struct SaveDir {
    root: PathBuf,
    /// Holds the lock; closing it releases the lock.
    _lock: File,
    /// Whether this run created the directory (removed again if the run saves nothing).
    created: bool,
}

impl SaveDir {
    /// Claims `root` for a run that saves there: a new run needs an absent or empty directory
    /// (or one whose run never finished an epoch), `--resume` one holding a saved run.
    pub fn claim(root: &Path, resume: bool) -> anyhow::Result<SaveDir> {
        let created = match std::fs::metadata(root) {
            Ok(meta) if meta.is_dir() => false,
            Ok(_) => bail!("--save {}: not a directory", root.display()),
            Err(error) if error.kind() == ErrorKind::NotFound => {
                if resume {
                    bail!(
                        "nothing to resume: --save {} does not exist",
                        root.display()
                    );
                }
                std::fs::create_dir_all(root).with_context(|| {
                    format!("--save {}: cannot create the directory", root.display())
                })?;
                true
            }
            Err(error) if error.kind() == ErrorKind::NotADirectory => {
                return Err(error).with_context(|| {
                    format!(
                        "--save {}: cannot create the directory (a parent is a file)",
                        root.display()
                    )
                });
            }
            Err(error) => {
                return Err(error)
                    .with_context(|| format!("--save {}: cannot read", root.display()));
            }
        };
        let names = entries(root)?;
        let holds = |name: &str| names.iter().any(|n| n == name);
        if !names.is_empty() && !holds(STATE_FILE) && !holds(LOCK_FILE) {
            bail!(
                "--save {}: the directory holds files but no run saved by this trainer (no \
                 {STATE_FILE}); choose a new or empty directory (nothing in it was touched)",
                root.display()
            );
        }
        if holds(STATE_FILE) && !resume {
            bail!(
                "{} holds a saved run: pass --resume to continue it, or choose another --save \
                 directory",
                root.display()
            );
        }
        let lock = lock(root)?;
        Ok(SaveDir {
            root: root.to_path_buf(),
            _lock: lock,
            created,
        })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for SaveDir {
    /// A directory this run created and saved nothing in goes again.
    fn drop(&mut self) {
        if self.created
            && entries(&self.root).is_ok_and(|names| names == [OsString::from(LOCK_FILE)])
        {
            let _ = std::fs::remove_file(self.root.join(LOCK_FILE));
            let _ = std::fs::remove_dir(&self.root);
        }
    }
}

/// The names in `dir`.
fn entries(dir: &Path) -> anyhow::Result<Vec<OsString>> {
    std::fs::read_dir(dir)
        .and_then(|entries| entries.map(|entry| entry.map(|e| e.file_name())).collect())
        .with_context(|| format!("--save {}: cannot list the directory", dir.display()))
}

/// Takes `root`'s [`LOCK_FILE`] (creating it: this also proves the directory writable).
fn lock(root: &Path) -> anyhow::Result<File> {
    let path = root.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("--save {}: cannot write in the directory", root.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            bail!(
                "--save {}: another train run is saving there ({}); two runs in one directory \
                 would replace each other's saves",
                root.display(),
                holder.trim()
            );
        }
        Err(TryLockError::Error(error)) if error.kind() == ErrorKind::Unsupported => {
            let _ = writeln!(
                std::io::stderr(),
                "warning: --save {}: this file system cannot lock {LOCK_FILE}; make sure no other \
                 run saves there",
                root.display()
            );
        }
        Err(TryLockError::Error(error)) => {
            return Err(error).with_context(|| format!("cannot lock {}", path.display()));
        }
    }
    let holder = format!("process {}", std::process::id());
    file.set_len(0)
        .and_then(|()| file.write_all(holder.as_bytes()))
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(file)
}
