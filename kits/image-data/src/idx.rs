//! A reader for IDX files (the MNIST family's format), plain or gzip-compressed.
//!
//! An IDX file is a 4-byte magic number — two zero bytes, a type code (`0x08`: unsigned bytes)
//! and the number of dimensions — then each dimension as a big-endian `u32`, then the values in
//! row-major order.

use std::io::Read;
use std::path::Path;

use flate2::read::GzDecoder;

use crate::DataError;

/// The type code of unsigned-byte data, the only one image and label files use.
const UNSIGNED_BYTE: u8 = 0x08;

/// An IDX array of unsigned bytes: its dimensions and its values in row-major order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxArray {
    /// The size of each dimension, outermost first.
    pub dims: Vec<usize>,
    /// The values, row-major.
    pub data: Vec<u8>,
}

/// Reads an IDX file of unsigned bytes with `ndims` dimensions, gzip-compressed or not (told
/// apart by gzip's magic bytes, not by the name). `hint` ends the error messages (how to get a
/// good copy).
pub fn read_idx(path: &Path, ndims: usize, hint: &str) -> Result<IdxArray, DataError> {
    let expected = format!("IDX file of unsigned bytes with {ndims} dimension(s)");
    let raw = std::fs::read(path).map_err(|source| DataError::Unreadable {
        path: path.to_path_buf(),
        expected: expected.clone(),
        source,
    })?;
    let corrupt = |found: String| DataError::Corrupt {
        path: path.to_path_buf(),
        expected: expected.clone(),
        found,
        hint: hint.to_string(),
    };
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut bytes = Vec::new();
        GzDecoder::new(raw.as_slice())
            .read_to_end(&mut bytes)
            .map_err(|e| corrupt(format!("the gzip data cannot be decompressed ({e})")))?;
        bytes
    } else {
        raw
    };
    parse(&bytes, ndims).map_err(corrupt)
}

/// Parses IDX bytes; the error says what is wrong.
fn parse(bytes: &[u8], ndims: usize) -> Result<IdxArray, String> {
    let Some(magic) = bytes.get(..4) else {
        return Err(format!(
            "{} bytes, shorter than the 4-byte magic number",
            bytes.len()
        ));
    };
    if magic[..2] != [0, 0] || magic[2] != UNSIGNED_BYTE || magic[3] as usize != ndims {
        return Err(format!(
            "magic number {:02x} {:02x} {:02x} {:02x}, expected 00 00 {UNSIGNED_BYTE:02x} {ndims:02x}",
            magic[0], magic[1], magic[2], magic[3]
        ));
    }
    let header = 4 + 4 * ndims;
    let Some(dim_bytes) = bytes.get(4..header) else {
        return Err(format!(
            "{} bytes, shorter than the {header}-byte header",
            bytes.len()
        ));
    };
    let dims: Vec<usize> = dim_bytes
        .chunks_exact(4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .collect();
    let values = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| format!("dimensions {dims:?} overflow"))?;
    let found = bytes.len() - header;
    if found != values {
        let how = if found < values {
            "truncated"
        } else {
            "too long"
        };
        return Err(format!(
            "{how}: the header's dimensions {dims:?} make {values} values, the file holds {found}"
        ));
    }
    Ok(IdxArray {
        dims,
        data: bytes[header..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut bytes = vec![0, 0, UNSIGNED_BYTE, dims.len() as u8];
        for d in dims {
            bytes.extend(d.to_be_bytes());
        }
        bytes.extend(data);
        bytes
    }

    #[test]
    fn parses_dimensions_and_values() {
        let array = parse(&idx(&[2, 3], &[1, 2, 3, 4, 5, 6]), 2).unwrap();
        assert_eq!(array.dims, vec![2, 3]);
        assert_eq!(array.data, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn rejects_wrong_magic_short_and_long_data() {
        let wrong_rank = parse(&idx(&[6], &[0; 6]), 2).unwrap_err();
        assert!(
            wrong_rank.contains("magic number 00 00 08 01"),
            "{wrong_rank}"
        );
        let mut float = idx(&[1], &[0; 4]);
        float[2] = 0x0d;
        assert!(parse(&float, 1).unwrap_err().contains("magic"));
        let short = parse(&idx(&[2, 3], &[0; 5]), 2).unwrap_err();
        assert!(short.starts_with("truncated"), "{short}");
        let long = parse(&idx(&[2, 3], &[0; 7]), 2).unwrap_err();
        assert!(long.starts_with("too long"), "{long}");
        assert!(parse(&[0, 0], 1).unwrap_err().contains("magic number"));
        assert!(parse(&[0, 0, 8, 3, 0], 3).unwrap_err().contains("header"));
    }
}
