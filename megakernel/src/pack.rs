//! A case pack: many (bundle, task telemetry) pairs in one gzip-compressed
//! JSON-lines file, so a GPU run brings back few files. `unpack` writes the
//! usual per-case files (`NAME.bundle.json`, `NAME.tasks.json`).

use flate2::write::GzEncoder;
use ground_truth::io::{read_input, InputLimits};
use ground_truth::megakernel::TaskTelemetry;
use ground_truth::{Bundle, FormatError, Readable};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One line of a pack.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackedCase {
    pub bundle: Bundle,
    pub telemetry: TaskTelemetry,
}

/// Writes `cases` to `path` atomically (temp file + rename).
pub fn write(path: &Path, cases: &[PackedCase]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let f = std::fs::File::create(&tmp)?;
        let gz = GzEncoder::new(std::io::BufWriter::new(f), flate2::Compression::new(6));
        // serde_json writes a value in many small pieces: buffered, the encoder
        // compresses large blocks instead of running once per piece.
        let mut out = std::io::BufWriter::with_capacity(1 << 16, gz);
        for c in cases {
            serde_json::to_writer(&mut out, c)?;
            out.write_all(b"\n")?;
        }
        out.into_inner()
            .map_err(|e| e.into_error())?
            .finish()?
            .flush()?;
    }
    std::fs::rename(&tmp, path)
}

/// Reads a pack within the input-size policy of every reader (README
/// "Limits": its size and its gzip expansion); every bundle and sidecar is
/// checked as its reader would.
pub fn read(path: &Path) -> Result<Vec<PackedCase>, FormatError> {
    let bytes = read_input(path, "case pack", &InputLimits::DEFAULT)?;
    let mut out = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        let c: PackedCase = ground_truth::io::from_json(
            &PathBuf::from(format!("{}:{}", path.display(), i + 1)),
            line,
        )?;
        if let Some((p, m)) = c.bundle.problems().into_iter().next() {
            return Err(FormatError::new(
                path,
                format!("line {}: .bundle.{p}", i + 1),
                m,
            ));
        }
        if let Some((p, m)) = c.telemetry.problems().into_iter().next() {
            return Err(FormatError::new(
                path,
                format!("line {}: .telemetry.{p}", i + 1),
                m,
            ));
        }
        out.push(c);
    }
    Ok(out)
}

/// Writes each case of a pack as `DIR/ID.bundle.json` + `DIR/ID.tasks.json`.
pub fn unpack(cases: &[PackedCase], dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    for c in cases {
        let id = c.bundle.id();
        let b = dir.join(format!("{id}.bundle.json"));
        let t = dir.join(format!("{id}.tasks.json"));
        c.bundle.write(&b)?;
        c.telemetry.write(&t)?;
        files.push(b);
        files.push(t);
    }
    Ok(files)
}
