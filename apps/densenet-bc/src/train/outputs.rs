//! The run's outputs, claimed before the first step: the save directory (checked, created,
//! locked against a second run) and the report file (checked writable, its temporary file
//! created). A run that cannot write its results says so before it trains, not hours later.
//!
//! The trainer never removes or overwrites what it did not write: `--save` refuses a directory
//! that holds anything but a save of this trainer, and `--report` refuses the names a save uses.

use std::ffi::OsString;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::save::{STATE_FILE, commit, temp_path};

/// The lock file of a save directory: locked (an OS file lock, released when the process ends,
/// however it ends) by the run that saves there; it holds that run's process id.
pub const LOCK_FILE: &str = "train.lock";

/// A save directory claimed by this run: it is a directory, holds nothing but a save of this
/// trainer, is writable, and no other run saves there while this value lives.
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
                "--save {}: the directory holds files but no run saved by this trainer (no {STATE_FILE}); \
                 choose a new or empty directory (nothing in it was touched)",
                root.display()
            );
        }
        if holds(STATE_FILE) && !resume {
            bail!(
                "{} holds a saved run: pass --resume to continue it, or choose another --save directory",
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

/// The report file, claimed: its directory exists and is writable (its temporary file is open),
/// and it is not a file of the save directory. [`ReportFile::write`] replaces it atomically.
#[derive(Debug)]
pub struct ReportFile {
    path: PathBuf,
    temp: PathBuf,
    file: Option<File>,
}

impl ReportFile {
    /// Claims `path` for the report of a run that saves in `save`.
    pub fn claim(path: &Path, save: Option<&SaveDir>) -> anyhow::Result<ReportFile> {
        let shown = path.display();
        if path.is_dir() {
            bail!("--report {shown} is a directory: give a file name, e.g. {shown}/report.json");
        }
        let Some(name) = path.file_name() else {
            bail!("--report {shown}: give a file name, e.g. report.json");
        };
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        if !parent.is_dir() {
            bail!(
                "--report {shown}: the directory {} does not exist",
                parent.display()
            );
        }
        if let Some(save) = save {
            check_outside_save(path, parent, name, save.root())?;
        }
        let temp = temp_path(path)?;
        let file = File::create(&temp).with_context(|| {
            format!(
                "--report {shown}: cannot write in {} (tried {})",
                parent.display(),
                temp.display()
            )
        })?;
        Ok(ReportFile {
            path: path.to_path_buf(),
            temp,
            file: Some(file),
        })
    }

    /// The report's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` as the report: into the temporary file, flushed, renamed over the path.
    pub fn write(mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let mut file = self.file.take().expect("a claimed report is written once");
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cannot write {}", self.temp.display()))?;
        commit(&self.temp, &self.path)
    }
}

impl Drop for ReportFile {
    /// A report never written leaves no temporary file behind.
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Refuses a report path that is one of the save's own files or inside one of its epochs.
fn check_outside_save(
    path: &Path,
    parent: &Path,
    name: &std::ffi::OsStr,
    root: &Path,
) -> anyhow::Result<()> {
    let (Ok(parent), Ok(root)) = (parent.canonicalize(), root.canonicalize()) else {
        return Ok(());
    };
    let reserved = [STATE_FILE, LOCK_FILE].iter().any(|own| {
        let own = Path::new(own);
        name == own || Some(name) == temp_path(own).ok().as_deref().and_then(Path::file_name)
    });
    if parent == root && reserved {
        bail!(
            "--report {} would overwrite the save's own {}: give another file name",
            path.display(),
            name.to_string_lossy()
        );
    }
    if let Ok(inside) = parent.strip_prefix(&root)
        && inside
            .components()
            .next()
            .is_some_and(|first| first.as_os_str().to_string_lossy().starts_with("epoch-"))
    {
        bail!(
            "--report {}: the save's epoch directories are replaced every epoch; write the report \
             elsewhere",
            path.display()
        );
    }
    Ok(())
}
