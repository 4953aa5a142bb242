"""Opening and recovering one partition directory's segments (blocking, no Twisted).

Recovery policy (the operator's summary is in ``docs/operations.md``, "Recovery"):

- ``recovery_point`` None (the previous shutdown was clean): indexes are trusted; only the
  bytes after each segment's last index entry are walked (headers only) to find the end.
  A missing or insane index, or a tail that does not end on a batch boundary, makes that
  segment fall back to full validation.
- Otherwise every batch from the segment holding ``recovery_point`` onward is validated
  (length, magic, CRC-32C, offsets increasing). Past the recovery point the log is cut at
  the first invalid byte and later segments are deleted (Kafka's rule: a torn tail is
  expected after a crash). Below it (in the segment holding the recovery point) the
  bytes were fsynced and acknowledged, so damage there is rot, not a torn write: it is
  quarantined (``segment/resync.py``: logged with file and byte, stepped over to the next valid
  batch, reads of it fail) and the acknowledged batches after it are kept. Damage below
  the recovery point with no valid batch after it is cut like a torn tail (nothing
  valid would be kept by not cutting).
- Validated segments are not synced at recovery (Kafka's rule too: a kill -9 leaves the
  bytes in the page cache, and syncing gigabytes would hold the start back): the
  partition's durable point stays the checkpointed recovery point
  (``RecoveryStats.unsynced_from``) until :func:`sync_recovered`, run in the background
  once the broker serves, has synced them and their rebuilt indexes. A crash before
  that validates them again. Torn-tail truncation and segment deletion are still synced
  at once.
- Segments before the recovery point were flushed; they are not rescanned. If damage is
  found in one of them (its index had to be rebuilt), nothing is deleted: the damaged
  batches stay on disk and reads reaching them fail with :class:`StorageError` naming the
  segment and byte, rather than silently dropping the good segments after them.

Leftovers of interrupted operations (temporary files with Kafka's suffixes, index files
whose log is gone) are removed before anything is opened, with one exception: a
``<base>.log.swap`` is a cleaned segment the log cleaner had committed to (written,
fsynced and renamed to ``.swap``, see ``docs/compaction.md``), so its swap is completed:
it replaces ``<base>.log`` and that segment's indexes are rebuilt. A ``.log.cleaned`` file
(a cleaning pass that had not committed) is simply removed: the original segment is
still there.

A compacted log has offset gaps, between batches and between segments (the cleaner keeps
offsets); so a segment may start after the previous one's end, never before it.

What this module does not do: validate single batches or rebuild indexes (``segment/segment.py``
and ``record/header.py`` do), or hold the segments afterwards (``log/partition_log.py``).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import re
from collections.abc import Callable, Sequence

import attrs

from brokerd.errors import StorageError
from brokerd.storage.fileio import DIR_MODE, fsync_dir
from brokerd.storage.segment.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_FILE_RE,
    TIMEINDEX_SUFFIX,
    Segment,
    segment_file_name,
)

__all__ = [
    "SWAP_SUFFIX",
    "RecoveryStats",
    "complete_swap",
    "install_cleaned",
    "open_segments",
    "recover_segments",
    "sync_recovered",
]

log = logging.getLogger("brokerd.storage")

_TEMP_RE = re.compile(r"\d{20}\.(log|index|timeindex|txnindex)\.(tmp|deleted|cleaned|swap)\Z")
#: A cleaned segment committed by the log cleaner, to be swapped in.
SWAP_SUFFIX = ".swap"
_LOG_SWAP_RE = re.compile(r"(\d{20})\.log\.swap\Z")
#: ``quarantine_below`` for a segment wholly below the recovery point.
_FLUSHED_ALL = 2**63


@attrs.frozen
class RecoveryStats:
    """What opening the log had to do; ``clean`` means no recovery point was given."""

    clean: bool
    segments: int = 0
    #: Segments whose every batch was validated.
    segments_validated: int = 0
    batches_validated: int = 0
    bytes_truncated: int = 0
    segments_deleted: int = 0
    #: Segments whose index was missing or failed its sanity checks.
    indexes_rebuilt: int = 0
    #: Flushed segments found damaged (kept; reads of the damage fail).
    segments_damaged: int = 0
    #: Damaged regions below the recovery point stepped over and kept (``segment/resync.py``).
    regions_quarantined: int = 0
    #: The first problem met, for the operator's log.
    first_problem: str | None = None
    #: The recovery point validation started from (None after a clean shutdown).
    recovery_point: int | None = None
    #: Base offset of the first segment validated but not synced: from it on, the log's
    #: bytes and indexes are durable only once :func:`sync_recovered` ran (None: nothing
    #: left to sync). Until then ``recovery_point`` is still the partition's durable point.
    unsynced_from: int | None = None


def open_segments(
    path: str, index_interval: int, recovery_point: int | None
) -> tuple[list[Segment], RecoveryStats]:
    """Open (creating if needed) the partition directory ``path`` and recover its
    segments: at least one, in offset order, the last one active."""
    if os.path.islink(path):
        raise StorageError(f"refusing symlinked partition directory {path}")
    try:
        try:
            names = os.listdir(path)
        except FileNotFoundError:
            os.makedirs(path, mode=DIR_MODE, exist_ok=True)
            names = os.listdir(path)
    except OSError as exc:
        raise StorageError(f"cannot open partition directory {path}: {exc}") from exc
    names = _complete_swaps(path, names)
    bases: set[int] = set()
    txn_bases: set[int] = set()
    side_files: list[tuple[int, str]] = []
    leftovers: list[str] = []
    for name in names:
        match = SEGMENT_FILE_RE.match(name)
        if match is None:
            if _TEMP_RE.match(name):
                # Leftovers of an interrupted operation (Kafka's suffixes).
                leftovers.append(name)
            continue
        base = int(match.group(1))
        if match.group(2) == "log":
            bases.add(base)
        else:
            side_files.append((base, name))
            if match.group(2) == "txnindex":
                txn_bases.add(base)
    # An index whose log is gone (retention deletes the log first): an orphan.
    leftovers += [name for base, name in side_files if base not in bases]
    try:
        for name in leftovers:
            os.unlink(os.path.join(path, name))
    except OSError as exc:
        raise StorageError(f"cannot clean {path}: {exc}") from exc
    segments: list[Segment] = []
    try:
        if not bases:
            segments.append(Segment.create(path, 0, index_interval))
            stats = RecoveryStats(clean=recovery_point is None, segments=1)
        else:
            segments = [Segment.open(path, base, index_interval) for base in sorted(bases)]
            for segment in segments:
                # Saves trying to open a file the listing just showed is not there.
                segment.txnindex_listed = segment.base_offset in txn_bases
            stats = recover_segments(path, segments, recovery_point)
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    return segments, stats


def complete_swap(path: str, base: int) -> None:
    """Make the committed cleaned segment ``<base>.log.swap`` the segment ``<base>``: drop
    the old segment's indexes (they describe the old file), then rename over its log.
    Idempotent, so a crash anywhere in it is finished by the next open. The caller
    fsyncs the directory. Raises :class:`OSError`."""
    log_name = segment_file_name(base, LOG_SUFFIX)
    for suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(path, segment_file_name(base, suffix)))
    os.replace(os.path.join(path, log_name + SWAP_SUFFIX), os.path.join(path, log_name))


def install_cleaned(
    path: str,
    old: Segment,
    cleaned: str,
    index_interval: int,
    hook: Callable[[str], None] | None = None,
) -> Segment:
    """Swap the fsynced cleaned copy ``cleaned`` of segment ``old`` in (the caller holds
    the log's swap lock): rename it to ``<base>.log.swap`` and fsync the directory (the
    commit point: from here a crash is finished by :func:`complete_swap` at the next
    open), then complete the swap and open the new segment, rebuilding its indexes.
    ``old`` keeps its open file, so readers holding it finish on the old bytes.
    ``hook`` is called with the name of each step done (crash tests stop there).
    Raises :class:`StorageError`."""
    base = old.base_offset
    swap = os.path.join(path, segment_file_name(base, LOG_SUFFIX) + SWAP_SUFFIX)
    step = hook or (lambda _name: None)
    try:
        os.replace(cleaned, swap)
        fsync_dir(path)
        step("swap-committed")
        complete_swap(path, base)
        fsync_dir(path)
        step("swap-renamed")
    except OSError as exc:
        raise StorageError(f"cannot swap cleaned segment {swap} in: {exc}") from exc
    new = Segment.open(path, base, index_interval)
    try:
        new.recover()
        new.persist_indexes(sync=True)
    except BaseException:
        new.close()
        raise
    step("swap-indexed")
    return new


def _sync_indexes(segment: Segment) -> None:
    try:
        segment.persist_indexes(sync=True)
    except StorageError as exc:
        # A full disk: served from memory, written when the segment is sealed or closed.
        log.warning("%s: rebuilt indexes kept in memory only: %s", segment.log_path, exc)


def sync_recovered(segments: Sequence[Segment], unsynced_from: int) -> None:
    """Make the segments recovery validated durable: fdatasync each log file from base
    offset ``unsynced_from`` on and fsync its indexes. A segment deleted since (retention,
    a cleaner swap) is skipped: its bytes no longer matter, or its replacement was synced
    when installed. Raises :class:`OSError` (the caller decides whether it is fatal)."""
    for segment in segments:
        if segment.base_offset < unsynced_from or not segment.pin():
            continue
        try:
            segment.sync()
            segment.persist_indexes(sync=True)
        except StorageError as exc:
            raise OSError(f"{segment.log_path}: {exc}") from exc
        finally:
            segment.unpin()


def _complete_swaps(path: str, names: list[str]) -> list[str]:
    """Finish every swap a crash interrupted; returns the directory's names after it."""
    swaps = [int(m.group(1)) for m in map(_LOG_SWAP_RE.match, names) if m is not None]
    if not swaps:
        return names
    try:
        for base in swaps:
            log.warning("%s: completing the swap of cleaned segment %d", path, base)
            complete_swap(path, base)
        fsync_dir(path)
        return os.listdir(path)
    except OSError as exc:
        raise StorageError(f"cannot complete a cleaned segment's swap in {path}: {exc}") from exc


def recover_segments(
    path: str, segments: list[Segment], recovery_point: int | None
) -> RecoveryStats:
    """Load or validate ``segments`` in place (deleting some); see the module docstring."""
    clean = recovery_point is None
    n = len(segments)
    if recovery_point is None:
        first_validated = n
    else:
        bases = [s.base_offset for s in segments]
        # The segment holding the recovery point, and always the active one.
        first_validated = max(0, min(n - 1, bisect.bisect_right(bases, recovery_point) - 1))
    validated: list[Segment] = []
    batches = truncated = deleted = rebuilt = damaged = quarantined = 0
    problem: str | None = None
    prev_end: int | None = None
    unsynced_from: int | None = None
    i = 0
    while i < len(segments):
        segment = segments[i]
        last = i == len(segments) - 1
        trusted = i < first_validated
        if trusted and segment.load():
            prev_end = segment.next_offset
            i += 1
            continue
        if not trusted and prev_end is not None and segment.base_offset < prev_end:
            problem = problem or (
                f"{segment.log_path}: starts at offset {segment.base_offset}, before the "
                f"previous segment's end {prev_end}"
            )
            cut_from = i
        else:
            if trusted:
                rebuilt += 1
            elif unsynced_from is None:
                unsynced_from = segment.base_offset
            # A flushed, sealed segment keeps its bytes even if damaged.
            keep_damage = trusted and not last
            # Below the recovery point the bytes were fsynced and acknowledged: damage
            # there is quarantined, not truncated (resync.py).
            outcome = segment.recover(
                truncate=not keep_damage,
                quarantine_below=_FLUSHED_ALL if trusted else (recovery_point or 0),
            )
            validated.append(segment)
            if trusted:
                # Rare (a damaged or missing index): made durable now, so that only the
                # segments from the recovery point on are left to sync.
                _sync_indexes(segment)
            batches += outcome.batches
            quarantined += outcome.quarantined
            if outcome.quarantined:
                damaged += 1
                problem = problem or (
                    f"{segment.log_path}: damaged region at byte {segment.damaged[0].start} "
                    f"quarantined ({segment.damaged[0].reason})"
                )
            if outcome.reason is not None:
                problem = problem or f"{segment.log_path}: {outcome.reason}"
            if outcome.reason is not None and keep_damage:
                damaged += 1
                log.error(
                    "%s: damaged flushed segment kept; reads of the damage will fail: %s",
                    segment.log_path,
                    outcome.reason,
                )
                prev_end = None
                i += 1
                continue
            if outcome.truncated:
                truncated += outcome.truncated
                log.warning(
                    "%s: truncated %d bytes: %s",
                    segment.log_path,
                    outcome.truncated,
                    outcome.reason,
                )
            if outcome.reason is None:
                prev_end = segment.next_offset
                i += 1
                continue
            cut_from = i + 1
        # Kafka's rule for an unflushed tail: everything after the first bad byte goes.
        for doomed in segments[cut_from:]:
            log.warning("%s: deleted, it follows the truncation point", doomed.log_path)
            doomed.delete()
            deleted += 1
        del segments[cut_from:]
        break
    # The validated segments are not synced here (Kafka does not either): a kill -9 leaves
    # their bytes in the page cache, and forcing gigabytes to disk would hold the start
    # back. The recovery point stays where it was until sync_recovered() (run in the
    # background once serving) has synced them, so a second crash validates them again.
    try:
        if deleted:
            fsync_dir(path)
    except OSError as exc:
        raise StorageError(f"cannot sync {path} after recovery: {exc}") from exc
    if unsynced_from is not None and not any(s.base_offset >= unsynced_from for s in segments):
        unsynced_from = None
    return RecoveryStats(
        clean=clean,
        segments=len(segments),
        segments_validated=len(validated),
        batches_validated=batches,
        bytes_truncated=truncated,
        segments_deleted=deleted,
        indexes_rebuilt=rebuilt,
        segments_damaged=damaged,
        regions_quarantined=quarantined,
        first_problem=problem,
        recovery_point=recovery_point,
        unsynced_from=unsynced_from,
    )
