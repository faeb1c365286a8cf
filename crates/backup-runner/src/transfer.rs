//! Moving archive bytes: from a reader into a multipart upload, and from a
//! stored object into a process, hashing them on the way.
//!
//! Memory is bounded by the part size: one part filling and at most
//! `in_flight` uploading; reading waits while they are full (backpressure
//! reaches pg_dump through its stdout pipe). Part buffers are reused
//! ([`Buffers`]) rather than freed and allocated again: freed 8 MiB blocks
//! stay in the allocator's per-thread arenas, which is how resident memory
//! grew from upload to upload.

use std::future::Future;
use std::io::{BufWriter, Read, Seek, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::{GetResultPayload, MultipartUpload, ObjectStoreExt, PutPayload};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::compression;
use crate::parts::{MAX_PARTS, max_archive, part_size};
use crate::store::Store;
use crate::{Error, Metrics};

/// Parts uploading while the next one fills, for one stream.
pub const PARTS_IN_FLIGHT: usize = 2;

/// Part buffers, lent to parts and given back once a part is sent (its
/// last copy dropped), to be filled again. At most `keep` wait idle; the
/// uploads' `in_flight` (not this) caps how many are lent, so a store that
/// keeps parts until the upload completes still cannot block one.
#[derive(Clone, Debug)]
pub struct Buffers {
    idle: Arc<Mutex<Vec<Vec<u8>>>>,
    keep: usize,
}

impl Buffers {
    pub fn new(keep: usize) -> Self {
        Self {
            idle: Arc::default(),
            keep,
        }
    }

    /// A buffer of `size` bytes: an idle one, or a new one.
    fn take(&self, size: usize) -> Vec<u8> {
        let idle = self.idle.lock().expect("not poisoned").pop();
        match idle {
            Some(buffer) if buffer.len() == size => buffer,
            // Zeroed on demand by the allocator: pages are touched as filled.
            _ => vec![0u8; size],
        }
    }

    fn give_back(&self, buffer: Vec<u8>) {
        let mut idle = self.idle.lock().expect("not poisoned");
        if idle.len() < self.keep {
            idle.push(buffer);
        }
    }

    /// A buffer of `size` bytes, lent empty: back here when dropped.
    pub(crate) fn lend(&self, size: usize) -> Lent {
        Lent {
            buffer: self.take(size),
            filled: 0,
            buffers: self.clone(),
        }
    }

    /// Buffers waiting to be lent.
    pub fn idle(&self) -> usize {
        self.idle.lock().expect("not poisoned").len()
    }
}

/// A buffer filled from its start (a part's bytes, a chunk's), as
/// [`Bytes`] once full (`Bytes::from_owner`); back to its [`Buffers`] when
/// dropped.
pub(crate) struct Lent {
    buffer: Vec<u8>,
    filled: usize,
    buffers: Buffers,
}

impl Lent {
    /// Bytes filled so far.
    pub(crate) fn filled(&self) -> usize {
        self.filled
    }

    /// Copies what fits of `bytes` after what is filled: the bytes copied.
    pub(crate) fn fill_from(&mut self, bytes: &[u8]) -> usize {
        let taken = bytes.len().min(self.buffer.len() - self.filled);
        self.buffer[self.filled..self.filled + taken].copy_from_slice(&bytes[..taken]);
        self.filled += taken;
        taken
    }
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.buffer[..self.filled]
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.buffers.give_back(std::mem::take(&mut self.buffer));
    }
}
/// Progress is reported at least this often, in bytes.
const PROGRESS_EVERY: u64 = 1024 * 1024;

/// Size and sha256 (lowercase hex) of bytes that passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digested {
    pub size: u64,
    pub sha256: String,
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How an upload holds its parts: `in_flight` uploading at most, with
/// buffers from `buffers`.
#[derive(Clone, Debug)]
pub struct Parts {
    pub buffers: Buffers,
    pub in_flight: usize,
}

impl Parts {
    /// One stream's: [`PARTS_IN_FLIGHT`] uploading while one fills.
    pub fn stream() -> Self {
        Self {
            buffers: Buffers::new(PARTS_IN_FLIGHT + 1),
            in_flight: PARTS_IN_FLIGHT,
        }
    }
}

/// Streams `reader` into a multipart upload of `key`. Once the reader ends,
/// `finish` decides (pg_dump's exit status): the upload completes only if
/// it and every part succeeded; otherwise, and on any error or
/// cancellation, it is aborted, so nothing becomes visible.
#[allow(clippy::too_many_arguments)]
pub async fn upload<R, F, Fut>(
    store: &Store,
    key: &str,
    reader: &mut R,
    parts: &Parts,
    progress: &(dyn Fn(u64) + Send + Sync),
    metrics: &Metrics,
    cancel: &CancellationToken,
    finish: F,
) -> Result<Digested, Error>
where
    R: AsyncRead + Unpin,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    let location = store.location(key);
    let mut upload = store
        .inner()
        .put_multipart(&store.path(key))
        .await
        .map_err(Error::store("start the upload of", &location))?;
    let outcome = async {
        let digested = send_parts(
            &mut *upload,
            reader,
            parts,
            progress,
            metrics,
            cancel,
            &location,
        )
        .await?;
        finish().await?;
        upload
            .complete()
            .await
            .map_err(Error::store("complete the upload of", &location))?;
        Ok(digested)
    }
    .await;
    if outcome.is_err()
        && let Err(e) = upload.abort().await
    {
        // Unfinished parts stay invisible; a bucket lifecycle rule removes them.
        tracing::warn!(%location, error = %e, "cannot abort the multipart upload");
    }
    outcome
}

async fn send_parts<R: AsyncRead + Unpin>(
    upload: &mut dyn MultipartUpload,
    reader: &mut R,
    held: &Parts,
    progress: &(dyn Fn(u64) + Send + Sync),
    metrics: &Metrics,
    cancel: &CancellationToken,
    location: &str,
) -> Result<Digested, Error> {
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    // Dropping the set (an error, a cancellation) cancels unfinished parts.
    let mut parts: JoinSet<Result<u64, object_store::Error>> = JoinSet::new();
    let mut reported = 0u64;
    for index in 0..=MAX_PARTS {
        let Some(part) = part_size(index) else {
            // All parts used: fine only if nothing is left.
            let extra = read_part(reader, &mut [0u8; 1], cancel, &mut |_| {}).await?;
            if extra == 0 {
                break;
            }
            return Err(Error::TooLarge { max: max_archive() });
        };
        let part = usize::try_from(part).expect("parts are far below usize::MAX");
        // The buffer is taken once the parts in flight leave room for it.
        while parts.len() >= held.in_flight {
            wait_for_part(&mut parts, metrics, cancel, location).await?;
        }
        let mut buffer = held.buffers.take(part);
        let filled = read_part(reader, &mut buffer, cancel, &mut |filled| {
            let now = size + filled;
            if now >= reported + PROGRESS_EVERY {
                reported = now;
                progress(now);
            }
        })
        .await;
        let filled = match filled {
            Ok(filled) => filled,
            Err(e) => {
                held.buffers.give_back(buffer);
                return Err(e);
            }
        };
        if filled == 0 {
            held.buffers.give_back(buffer);
            break;
        }
        let last = filled < part;
        hasher.update(&buffer[..filled]);
        let length = filled as u64;
        size += length;
        let bytes = Bytes::from_owner(Lent {
            buffer,
            filled,
            buffers: held.buffers.clone(),
        });
        let sending = upload.put_part(PutPayload::from(bytes));
        parts.spawn(async move { sending.await.map(|()| length) });
        progress(size);
        reported = size;
        if last {
            break;
        }
    }
    while !parts.is_empty() {
        wait_for_part(&mut parts, metrics, cancel, location).await?;
    }
    Ok(Digested {
        size,
        sha256: hex(&hasher.finalize()),
    })
}

async fn wait_for_part(
    parts: &mut JoinSet<Result<u64, object_store::Error>>,
    metrics: &Metrics,
    cancel: &CancellationToken,
    location: &str,
) -> Result<(), Error> {
    let joined = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(Error::ShuttingDown),
        joined = parts.join_next() => joined,
    };
    match joined {
        None => Ok(()),
        Some(Ok(Ok(length))) => {
            metrics.uploaded.inc_by(length);
            Ok(())
        }
        Some(Ok(Err(e))) => Err(Error::store("upload a part of", location)(e)),
        Some(Err(e)) => Err(Error::Io {
            what: format!("uploading a part of {location}"),
            source: std::io::Error::other(e),
        }),
    }
}

/// Fills `buffer` from `reader`, to its size or the end; fewer bytes
/// means the end. Returns the bytes read.
async fn read_part<R: AsyncRead + Unpin>(
    reader: &mut R,
    buffer: &mut [u8],
    cancel: &CancellationToken,
    progress: &mut (dyn FnMut(u64) + Send),
) -> Result<usize, Error> {
    let size = buffer.len();
    let mut filled = 0;
    while filled < size {
        let read = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(Error::ShuttingDown),
            read = reader.read(&mut buffer[filled..]) => read,
        };
        let n = read.map_err(Error::io("cannot read pg_dump's output"))?;
        if n == 0 {
            break;
        }
        filled += n;
        progress(filled as u64);
    }
    Ok(filled)
}

/// Chunks read at a time from an object of a `file://` store.
const FILE_CHUNK: usize = 1024 * 1024;
/// Chunks of one object lent at once: [`CHUNKS_AHEAD`] queued for the
/// decompressing thread, one there and one being read (a restore's stream
/// holds fewer: one written, one held back, one being read).
const CHUNKS_LENT: usize = CHUNKS_AHEAD + 2;

/// The bytes of the object `key`, as a stream of chunks. object_store
/// reads a local file in 8 KiB chunks, each a round trip to a blocking
/// thread and a new allocation (14,000 for a 115 MiB archive, which was
/// most of a verification's time); local files are read here in 1 MiB
/// chunks instead, into buffers given back once a chunk is dropped
/// ([`Buffers`]), as uploads' parts are. Other stores stream what their
/// HTTP client receives.
async fn object_chunks(
    store: &Store,
    key: &str,
) -> Result<BoxStream<'static, object_store::Result<Bytes>>, Error> {
    let location = store.location(key);
    let got = store
        .inner()
        .get(&store.path(key))
        .await
        .map_err(Error::store("read", &location))?;
    let (file, path) = match got.payload {
        GetResultPayload::File(file, path) => (file, path),
        GetResultPayload::Stream(_) => return Ok(got.into_stream()),
    };
    let range = got.range;
    let seek = tokio::task::spawn_blocking(move || {
        let mut file = file;
        file.seek(std::io::SeekFrom::Start(range.start))
            .map(|_| file)
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|seeked| seeked);
    let file = seek.map_err(|e| Error::store("read", &location)(local_error(e, &path)))?;
    let remaining = range.end - range.start;
    let buffers = Buffers::new(CHUNKS_LENT);
    Ok(futures::stream::try_unfold(
        (file, path, remaining, buffers),
        |(file, path, remaining, buffers)| async move {
            if remaining == 0 {
                return Ok(None);
            }
            let mut chunk = buffers.lend(FILE_CHUNK);
            let read = tokio::task::spawn_blocking(move || {
                let want =
                    usize::try_from(remaining.min(FILE_CHUNK as u64)).expect("at most FILE_CHUNK");
                let read = fill(&file, &mut chunk.buffer[..want]).map(|filled| {
                    chunk.filled = filled;
                    chunk
                });
                (file, read)
            })
            .await
            .map_err(|e| local_error(std::io::Error::other(e), &path))?;
            let (file, chunk) = read;
            let chunk = chunk.map_err(|e| local_error(e, &path))?;
            if chunk.filled == 0 {
                // Shorter than its metadata said: the reader's checksum
                // and size comparison report it.
                return Ok(None);
            }
            let left = remaining - chunk.filled as u64;
            Ok(Some((
                Bytes::from_owner(chunk),
                (file, path, left, buffers),
            )))
        },
    )
    .boxed())
}

/// Reads `file` into `buffer` until it is full or the file ends: the bytes
/// read.
fn fill(mut file: &std::fs::File, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The next chunk of an object read from `location`, or `ShuttingDown`
/// once `cancel` fires.
async fn next_chunk(
    chunks: &mut BoxStream<'static, object_store::Result<Bytes>>,
    location: &str,
    cancel: &CancellationToken,
) -> Result<Option<Bytes>, Error> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(Error::ShuttingDown),
        next = chunks.next() => next.transpose().map_err(Error::store("read", location)),
    }
}

fn local_error(source: std::io::Error, path: &std::path::Path) -> object_store::Error {
    object_store::Error::Generic {
        store: "LocalFileSystem",
        source: format!("cannot read {}: {source}", path.display()).into(),
    }
}

/// Streams the object `key` into `sink` (a process's stdin), hashing it,
/// and holds back its last chunk: the caller writes it only once the
/// checksum matches, so that a restore of a corrupt archive never sees its
/// end and cannot commit. If the sink closes early (the process exited), the
/// rest is still read and hashed; the process's exit status tells why.
pub async fn read_back<W: AsyncWrite + Unpin>(
    store: &Store,
    key: &str,
    sink: &mut W,
    cancel: &CancellationToken,
) -> Result<(Digested, Bytes), Error> {
    let location = store.location(key);
    let mut stream = object_chunks(store, key).await?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut held = Bytes::new();
    let mut sink_open = true;
    while let Some(chunk) = next_chunk(&mut stream, &location, cancel).await? {
        hasher.update(&chunk);
        size += chunk.len() as u64;
        let previous = std::mem::replace(&mut held, chunk);
        if sink_open && !previous.is_empty() && sink.write_all(&previous).await.is_err() {
            sink_open = false;
        }
    }
    let digested = Digested {
        size,
        sha256: hex(&hasher.finalize()),
    };
    Ok((digested, if sink_open { held } else { Bytes::new() }))
}

/// Chunks of an object read ahead of its decompression.
const CHUNKS_AHEAD: usize = 2;

/// Reads the object `key` (zstd) whole, hashing it and decompressing it
/// into a new file `into`, or only to check it when `None`. Hashing,
/// decompression and the file's writes run on a blocking thread of their
/// own, so that parts fetched at once use the cores there are. A frame that
/// does not decompress (or a full disk) does not stop the reading: the
/// checksum, which the caller compares first, says more about an altered
/// object than zstd does. That error, if any, is returned beside what was
/// read.
pub async fn fetch_decompressed(
    store: &Store,
    key: &str,
    into: Option<PathBuf>,
    cancel: &CancellationToken,
) -> Result<(Digested, Option<std::io::Error>), Error> {
    let location = store.location(key);
    let mut chunks = object_chunks(store, key).await?;
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<Bytes>(CHUNKS_AHEAD);
    let decompressing = tokio::task::spawn_blocking(move || {
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let sink = match into {
            None => Ok(Box::new(std::io::sink()) as Box<dyn Write>),
            Some(path) => std::fs::File::create(&path)
                .map(|file| {
                    Box::new(BufWriter::with_capacity(compression::STREAM_BUFFER, file))
                        as Box<dyn Write>
                })
                .map_err(|e| {
                    std::io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
                }),
        };
        let mut decoder = sink.and_then(zstd::stream::write::Decoder::new);
        while let Some(chunk) = receiver.blocking_recv() {
            hasher.update(&chunk);
            size += chunk.len() as u64;
            if let Ok(writing) = &mut decoder
                && let Err(e) = writing.write_all(&chunk)
            {
                decoder = Err(e);
            }
        }
        let failed = match decoder {
            // An incomplete frame fails here.
            Ok(decoder) => decoder.finish().and_then(|mut sink| sink.flush()).err(),
            Err(e) => Some(e),
        };
        let digested = Digested {
            size,
            sha256: hex(&hasher.finalize()),
        };
        (digested, failed)
    });
    while let Some(chunk) = next_chunk(&mut chunks, &location, cancel).await? {
        if sender.send(chunk).await.is_err() {
            break; // The thread ended: its join says why.
        }
    }
    drop(sender);
    decompressing.await.map_err(|e| Error::Io {
        what: format!("decompressing {location}"),
        source: std::io::Error::other(e),
    })
}

/// Writes the held-back last chunk and closes `sink`; a closed pipe is left
/// to the process's exit status to explain.
pub async fn finish_sink<W: AsyncWrite + Unpin>(mut sink: W, last: Bytes) {
    if !last.is_empty() {
        let _ = sink.write_all(&last).await;
    }
    let _ = sink.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_and_padded() {
        assert_eq!(hex(&[0x00, 0x0f, 0xab]), "000fab");
        assert_eq!(
            hex(&Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    fn local_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::from_url_opts(&format!("file://{}", dir.path().display()), []).unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn an_upload_completes_only_when_finish_agrees() {
        let (dir, store) = local_store();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let cancel = CancellationToken::new();
        let metrics = Metrics::default();
        let parts = Parts::stream();
        let digested = upload(
            &store,
            "ns/a.dump",
            &mut &data[..],
            &parts,
            &|_| {},
            &metrics,
            &cancel,
            || async { Ok(()) },
        )
        .await
        .unwrap();
        assert_eq!(digested.size, data.len() as u64);
        assert_eq!(digested.sha256, hex(&Sha256::digest(&data)));
        assert_eq!(std::fs::read(dir.path().join("ns/a.dump")).unwrap(), data);
        assert_eq!(metrics.uploaded.get(), data.len() as u64);

        let refused = upload(
            &store,
            "ns/b.dump",
            &mut &data[..],
            &parts,
            &|_| {},
            &metrics,
            &cancel,
            || async { Err(Error::PgTools("pg_dump failed".into())) },
        )
        .await;
        assert!(refused.is_err());
        let left: Vec<_> = std::fs::read_dir(dir.path().join("ns"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["a.dump"], "an aborted upload leaves nothing");
    }

    #[test]
    fn buffers_are_reused_up_to_their_number() {
        let buffers = Buffers::new(2);
        let first = buffers.take(1024);
        let pointer = first.as_ptr();
        buffers.give_back(first);
        let again = buffers.take(1024);
        assert_eq!(again.as_ptr(), pointer, "the same buffer, filled again");
        // Another size is a new buffer; idle ones beyond `keep` are freed.
        let other = buffers.take(10);
        assert_eq!(other.len(), 10);
        for buffer in [again, other, vec![0; 1024]] {
            buffers.give_back(buffer);
        }
        assert_eq!(buffers.idle(), 2);
    }

    #[tokio::test]
    async fn parts_go_back_to_their_buffers_once_sent() {
        let (dir, store) = local_store();
        // Three parts: two of 8 MiB and a short one.
        let data: Vec<u8> = (0..(17 << 20) as u32).map(|i| (i % 249) as u8).collect();
        let parts = Parts::stream();
        let digested = upload(
            &store,
            "ns/c.dump",
            &mut &data[..],
            &parts,
            &|_| {},
            &Metrics::default(),
            &CancellationToken::new(),
            || async { Ok(()) },
        )
        .await
        .unwrap();
        assert_eq!(digested.size, data.len() as u64);
        assert!(std::fs::read(dir.path().join("ns/c.dump")).unwrap() == data);
        // Never more than one filling and two in flight, all given back.
        assert!((1..=PARTS_IN_FLIGHT + 1).contains(&parts.buffers.idle()));
    }

    #[tokio::test]
    async fn reading_back_hashes_everything_and_holds_the_last_chunk() {
        let (_dir, store) = local_store();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 7) as u8).collect();
        store
            .inner()
            .put(&store.path("x"), PutPayload::from(data.clone()))
            .await
            .unwrap();
        let mut sink = Vec::new();
        let cancel = CancellationToken::new();
        let (digested, last) = read_back(&store, "x", &mut sink, &cancel).await.unwrap();
        assert_eq!(digested.size, data.len() as u64);
        assert_eq!(digested.sha256, hex(&Sha256::digest(&data)));
        assert!(!last.is_empty());
        sink.extend_from_slice(&last);
        assert_eq!(sink, data);
    }

    #[tokio::test]
    async fn local_objects_are_read_in_chunks_of_a_mebibyte() {
        let (_dir, store) = local_store();
        let data: Vec<u8> = (0..(2 * FILE_CHUNK + FILE_CHUNK / 2) as u32)
            .map(|i| (i % 13) as u8)
            .collect();
        store
            .inner()
            .put(&store.path("big"), PutPayload::from(data.clone()))
            .await
            .unwrap();
        let chunks: Vec<Bytes> = object_chunks(&store, "big")
            .await
            .unwrap()
            .map(|chunk| chunk.unwrap())
            .collect()
            .await;
        let sizes: Vec<usize> = chunks.iter().map(Bytes::len).collect();
        assert_eq!(sizes, [FILE_CHUNK, FILE_CHUNK, FILE_CHUNK / 2]);
        assert!(chunks.concat() == data);
    }

    #[tokio::test]
    async fn a_dropped_chunk_lends_its_buffer_to_the_next() {
        let (_dir, store) = local_store();
        let data: Vec<u8> = (0..3 * FILE_CHUNK as u32).map(|i| (i % 7) as u8).collect();
        store
            .inner()
            .put(&store.path("big"), PutPayload::from(data.clone()))
            .await
            .unwrap();
        let mut chunks = object_chunks(&store, "big").await.unwrap();
        let first = chunks.next().await.unwrap().unwrap();
        let held = chunks.next().await.unwrap().unwrap();
        assert_ne!(first.as_ptr(), held.as_ptr(), "both are lent");
        let address = first.as_ptr();
        drop(first);
        let third = chunks.next().await.unwrap().unwrap();
        assert_eq!(third.as_ptr(), address, "the first one's buffer, again");
        assert!([&held[..], &third[..]].concat() == data[FILE_CHUNK..]);
        assert!(chunks.next().await.is_none());
    }

    #[tokio::test]
    async fn a_fetched_frame_is_decompressed_into_its_file_and_a_cut_one_fails() {
        let (dir, store) = local_store();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut encoder = compression::encoder(Vec::new(), 1).unwrap();
        encoder.write_all(&data).unwrap();
        let frame = encoder.finish().unwrap();
        let cancel = CancellationToken::new();
        for (key, stored) in [("whole", &frame[..]), ("cut", &frame[..frame.len() / 2])] {
            store
                .inner()
                .put(&store.path(key), PutPayload::from(stored.to_vec()))
                .await
                .unwrap();
            let into = dir.path().join(format!("{key}.out"));
            let (read, failed) = fetch_decompressed(&store, key, Some(into.clone()), &cancel)
                .await
                .unwrap();
            assert_eq!(read.size, stored.len() as u64, "{key}");
            assert_eq!(read.sha256, hex(&Sha256::digest(stored)), "{key}");
            match key {
                "whole" => {
                    assert!(failed.is_none(), "{failed:?}");
                    assert!(std::fs::read(&into).unwrap() == data);
                }
                _ => assert_eq!(failed.unwrap().to_string(), "incomplete frame"),
            }
        }
        // Only checked: nothing written anywhere.
        let (read, failed) = fetch_decompressed(&store, "whole", None, &cancel)
            .await
            .unwrap();
        assert_eq!(read.size, frame.len() as u64);
        assert!(failed.is_none());
    }
}
