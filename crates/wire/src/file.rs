//! Record files: format metadata followed by records, so a file is readable
//! with no prior knowledge (the same rule as on a link: metadata once, before
//! the first record of that format).
//!
//! ```text
//! "GWRECF01"                            8-byte magic
//! chunk*: kind:u32 len:u32 data pad     kind 1 = format metadata, 2 = record
//!                                       data padded with zeros to 8 bytes
//! ```
//! Integers are little-endian. Because every chunk starts 8-aligned, a record
//! payload in a file read into an 8-aligned buffer can be viewed in place.

use std::collections::HashSet;
use std::sync::Arc;

use crate::error::{Result, WireError};
use crate::format::{Format, FormatId};
use crate::meta;
use crate::record::RecordRef;

pub const FILE_MAGIC: &[u8; 8] = b"GWRECF01";
const KIND_FORMAT: u32 = 1;
const KIND_RECORD: u32 = 2;

/// Builds a record file in memory.
#[derive(Default)]
pub struct FileWriter {
    buf: Vec<u8>,
    known: HashSet<FormatId>,
}

impl FileWriter {
    pub fn new() -> Self {
        FileWriter {
            buf: FILE_MAGIC.to_vec(),
            known: HashSet::new(),
        }
    }
    fn chunk(&mut self, kind: u32, data: &[u8]) -> Result<()> {
        let len = u32::try_from(data.len())
            .map_err(|_| WireError::Usage("chunk larger than 4 GiB".into()))?;
        self.buf.extend_from_slice(&kind.to_le_bytes());
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(data);
        let pad = self.buf.len().next_multiple_of(8) - self.buf.len();
        self.buf.extend(std::iter::repeat_n(0u8, pad));
        Ok(())
    }
    /// Write metadata for `f` unless already written.
    pub fn format(&mut self, f: &Format) -> Result<()> {
        if self.known.insert(f.id()) {
            self.chunk(KIND_FORMAT, &meta::serialize(f))?;
        }
        Ok(())
    }
    /// Write one framed record (see [`crate::record`]); its format goes first if new.
    pub fn record(&mut self, f: &Format, framed: &[u8]) -> Result<()> {
        let (r, n) = RecordRef::parse(framed)?;
        r.check_format(f)?;
        if n != framed.len() {
            return Err(WireError::Usage("trailing bytes after record".into()));
        }
        self.format(f)?;
        self.chunk(KIND_RECORD, framed)
    }
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// One item of a record file.
#[derive(Debug)]
pub enum Item<'a> {
    Format(Arc<Format>),
    Record(RecordRef<'a>),
}

/// Iterates the chunks of a record file held in memory. Stops at the first
/// error (and yields it); never panics on malformed input.
pub struct FileReader<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> FileReader<'a> {
    pub fn new(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < 8 || &buf[..8] != FILE_MAGIC {
            return Err(WireError::BadMagic {
                what: "record file",
            });
        }
        Ok(FileReader {
            buf,
            pos: 8,
            failed: false,
        })
    }
    fn next_item(&mut self) -> Result<Item<'a>> {
        let mut r = meta::Reader {
            b: self.buf,
            pos: self.pos,
        };
        let kind = r.u32()?;
        let len = r.u32()? as usize;
        let data = r.take(len)?;
        self.pos = r.pos.next_multiple_of(8).min(self.buf.len());
        match kind {
            KIND_FORMAT => Ok(Item::Format(meta::parse(data)?)),
            KIND_RECORD => {
                let (rec, n) = RecordRef::parse(data)?;
                if n != data.len() {
                    return Err(WireError::BadHeader(
                        "record chunk length disagrees with record header".into(),
                    ));
                }
                Ok(Item::Record(rec))
            }
            k => Err(WireError::BadHeader(format!("unknown chunk kind {k}"))),
        }
    }
}

impl<'a> Iterator for FileReader<'a> {
    type Item = Result<Item<'a>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let r = self.next_item();
        self.failed = r.is_err();
        Some(r)
    }
}

/// `gwrecord dump`: the JSON text for a whole record file. Formats are listed
/// in the order they appear; each record is reflected with its own format.
pub fn dump_json(buf: &[u8]) -> Result<String> {
    let mut reg = crate::decode::Registry::new();
    let mut formats = Vec::new();
    let mut records = Vec::new();
    for item in FileReader::new(buf)? {
        match item? {
            Item::Format(f) => {
                formats.push(crate::value::format_json(&f));
                reg.register(f);
            }
            Item::Record(r) => {
                let f = reg
                    .get(r.id)
                    .cloned()
                    .ok_or(WireError::UnknownFormat(r.id))?;
                r.check_format(&f)?;
                let v = crate::value::read_value(&f, r.payload)?;
                let mut s = String::from("{\"format\": ");
                crate::value::json_str(f.name(), &mut s);
                s.push_str(&format!(
                    ", \"id\": \"{}\", \"value\": {}}}",
                    f.id(),
                    crate::value::to_json(&v)
                ));
                records.push(s);
            }
        }
    }
    let mut out = String::from("{\n\"formats\": [\n");
    out.push_str(&formats.join(",\n"));
    out.push_str("\n],\n\"records\": [\n");
    out.push_str(&records.join(",\n"));
    out.push_str("\n]\n}\n");
    Ok(out)
}
