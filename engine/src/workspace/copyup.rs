//! Copy-up for programs that see the workspace as one folder (the sandbox): the files a session
//! wrote on less isolated instances are copied into this instance's layer, where it has none by
//! that name, so a jail that binds only this layer still finds them.
//!
//! Data only moves up (a lower layer is only ever given to a *more* isolated instance, see
//! `WorkspaceRoot::with_lower`), so copying never lowers where a byte lives. Regular files with
//! one link only; symlinks, FIFOs and other special files are skipped; every copy is admitted by
//! the session's disk limits first.

use std::io;

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _};
use rustix::fs::OFlags;

use super::{SessionWorkspace, WorkspaceError, is_temp_name};

/// Deepest folder level copied.
const MAX_DEPTH: usize = 64;

impl SessionWorkspace {
    /// Copies every regular file of the lower layers that this layer lacks (nearest layer
    /// first); returns how many were copied. Refuses with the limit's name when the session's
    /// disk limits would be passed.
    pub fn copy_up(&self) -> Result<u64, WorkspaceError> {
        let mut copied = 0;
        for lower in &self.lower {
            self.copy_tree(lower, &self.dir, 0, &mut copied)
                .map_err(|e| match e {
                    CopyError::Limit(w) => w,
                    CopyError::Io(e) => WorkspaceError::from_io("/workspace", "copy up", e),
                })?;
        }
        Ok(copied)
    }

    fn copy_tree(
        &self,
        from: &Dir,
        to: &Dir,
        depth: usize,
        copied: &mut u64,
    ) -> Result<(), CopyError> {
        if depth > MAX_DEPTH {
            return Ok(());
        }
        for entry in from.entries()? {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if is_temp_name(name) {
                continue;
            }
            let Ok(ft) = entry.file_type() else { continue };
            if ft.is_dir() {
                let Ok(sub_from) = entry.open_dir() else {
                    continue;
                };
                // Something that is not a folder by that name here: this layer wins.
                let Ok(sub_to) = super::open_child_dir(to, name) else {
                    continue;
                };
                self.copy_tree(&sub_from, &sub_to, depth + 1, copied)?;
            } else if ft.is_file() {
                if to.symlink_metadata(name).is_ok() {
                    continue;
                }
                let mut opts = OpenOptions::new();
                opts.read(true)
                    .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32);
                let Ok(src) = from.open_with(name, &opts) else {
                    continue;
                };
                let Ok((mut src, len)) = super::session::regular(src, name) else {
                    continue;
                };
                self.admit(len, 0, true).map_err(CopyError::Limit)?;
                let mut w = OpenOptions::new();
                w.write(true)
                    .create_new(true)
                    .mode(super::write::FILE_MODE)
                    .custom_flags(OFlags::NOFOLLOW.bits() as i32);
                let mut dst = to.open_with(name, &w)?.into_std();
                io::copy(&mut src, &mut dst)?;
                *copied += 1;
            }
        }
        Ok(())
    }
}

enum CopyError {
    Limit(WorkspaceError),
    Io(io::Error),
}

impl From<io::Error> for CopyError {
    fn from(e: io::Error) -> Self {
        CopyError::Io(e)
    }
}
