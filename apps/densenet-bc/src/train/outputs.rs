//! The run's outputs, claimed before the first step: the save directory (app-kit's
//! [`SaveDir`]: checked, created, locked against a second run) and the report file (checked
//! writable, its temporary file created). A run that cannot write its results says so before it
//! trains, not hours later.
//!
//! The trainer never removes or overwrites what it did not write: `--save` refuses a directory
//! that holds anything but a save of this trainer, and `--report` refuses the names a save uses.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use app_kit::save::{LOCK_FILE, STATE_FILE, SaveDir, commit, temp_path};

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
