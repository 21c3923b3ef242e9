//! [`LogFile`] for `std::fs::File` and a plain directory of segments.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use crate::file::{LogFile, SegmentDir};

impl LogFile for File {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
}

/// A directory holding segments named `000123.log` (for tests and tools; the
/// engine uses its own naming).
#[derive(Debug, Clone)]
pub struct StdSegmentDir {
    /// The directory.
    pub dir: PathBuf,
}

impl StdSegmentDir {
    /// Path of segment `number`.
    pub fn segment_path(&self, number: u64) -> PathBuf {
        self.dir.join(format!("{number:06}.log"))
    }
}

impl SegmentDir for StdSegmentDir {
    type File = File;

    fn create_segment(&self, number: u64) -> io::Result<File> {
        OpenOptions::new().read(true).write(true).create_new(true).open(self.segment_path(number))
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }
}
