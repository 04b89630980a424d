//! Serializing a large JSON array on every core.
//!
//! serde_json writes about 1 GB/s on one core, so a gigabyte bundle spent most
//! of its write time serializing. Here the array is cut into pieces that
//! worker threads serialize into reusable buffers while the calling thread
//! writes the finished pieces in order: the bytes are exactly those of
//! `serde_json::to_writer(out, items)`.

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// Items per piece: large enough that handing a piece over costs nothing next
/// to serializing it, small enough that the buffers in flight stay small.
const PIECE: usize = 16 * 1024;

/// Writes `items` as a compact JSON array, the same bytes as
/// `serde_json::to_writer`; arrays of more than a few pieces are serialized by
/// worker threads.
pub(super) fn write_array<W: Write + ?Sized, T: Serialize + Sync>(
    out: &mut W,
    items: &[T],
) -> io::Result<()> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    if workers < 2 || items.len() < 4 * PIECE {
        return serde_json::to_writer(out, items).map_err(io::Error::other);
    }
    let pieces: Vec<&[T]> = items.chunks(PIECE).collect();
    let next_piece = AtomicUsize::new(0);
    // Buffers circulate: a worker takes one *before* it claims a piece, so the
    // piece the writer waits for always has a buffer and always completes.
    let (free_tx, free_rx) = mpsc::channel::<Vec<u8>>();
    let free_rx = std::sync::Mutex::new(free_rx);
    for _ in 0..2 * workers {
        free_tx.send(Vec::new()).expect("the receiver is alive");
    }
    let (done_tx, done_rx) = mpsc::channel::<(usize, io::Result<Vec<u8>>)>();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let (done_tx, free_rx) = (done_tx.clone(), &free_rx);
            let (pieces, next_piece) = (&pieces, &next_piece);
            scope.spawn(move || loop {
                let Ok(mut buf) = free_rx.lock().expect("not poisoned").recv() else {
                    return;
                };
                let i = next_piece.fetch_add(1, Ordering::Relaxed);
                let Some(piece) = pieces.get(i) else { return };
                buf.clear();
                let serialized = serialize_piece(&mut buf, piece).map(|()| buf);
                if done_tx.send((i, serialized)).is_err() {
                    return;
                }
            });
        }
        drop(done_tx);
        let written = write_in_order(out, pieces.len(), &done_rx, &free_tx);
        if written.is_err() {
            // No piece is claimed any more: the workers stop.
            next_piece.store(pieces.len(), Ordering::Relaxed);
        }
        drop(free_tx);
        written
    })
}

/// The items of one piece, comma-separated, as they appear inside the array.
fn serialize_piece<T: Serialize>(buf: &mut Vec<u8>, piece: &[T]) -> io::Result<()> {
    for (j, item) in piece.iter().enumerate() {
        if j > 0 {
            buf.push(b',');
        }
        serde_json::to_writer(&mut *buf, item).map_err(io::Error::other)?;
    }
    Ok(())
}

/// Writes the pieces as they arrive, in piece order, and hands each buffer back.
fn write_in_order<W: Write + ?Sized>(
    out: &mut W,
    count: usize,
    done: &mpsc::Receiver<(usize, io::Result<Vec<u8>>)>,
    free: &mpsc::Sender<Vec<u8>>,
) -> io::Result<()> {
    out.write_all(b"[")?;
    let mut waiting: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
    let mut expected = 0;
    while expected < count {
        let (i, serialized) = done
            .recv()
            .map_err(|_| io::Error::other("a serializing thread stopped"))?;
        waiting.insert(i, serialized?);
        while let Some(buf) = waiting.remove(&expected) {
            if expected > 0 {
                out.write_all(b",")?;
            }
            out.write_all(&buf)?;
            free.send(buf).ok();
            expected += 1;
        }
    }
    out.write_all(b"]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_as_serde_json() {
        for n in [0, 1, PIECE - 1, 4 * PIECE, 4 * PIECE + 1, 9 * PIECE + 17] {
            let items: Vec<(u64, String)> = (0..n as u64)
                .map(|i| (i * 7919, format!("item \"{i}\"")))
                .collect();
            let mut ours = Vec::new();
            write_array(&mut ours, &items).unwrap();
            assert_eq!(ours, serde_json::to_vec(&items).unwrap(), "n = {n}");
        }
    }

    #[test]
    fn a_failing_item_fails_the_write() {
        struct Item(bool);
        impl Serialize for Item {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                if self.0 {
                    Err(serde::ser::Error::custom("bad item"))
                } else {
                    s.serialize_u8(1)
                }
            }
        }
        let items: Vec<Item> = (0..8 * PIECE).map(|i| Item(i == 5 * PIECE + 3)).collect();
        let err = write_array(&mut Vec::new(), &items).unwrap_err();
        assert!(err.to_string().contains("bad item"), "{err}");
    }
}
