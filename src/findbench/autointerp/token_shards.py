"""AutoInterp's model side split over token ranges: one process per GPU or machine encodes its part
of the corpus, and one run reads all parts instead of running the model and the SAE.

``findbench autointerp --token-shard I/N`` takes the corpus rows of the I-th of N ranges (whole
batches of ``--batch-size`` rows, so that each of its batches is one of the unsharded run's), runs
the model and the SAE on them and saves every latent's non-zero activations there in
``activations_<key>_<I>of<N>.npz`` (``key``: model, SAE, hook, corpus and batch size); a rerun finds
the file and does nothing. ``findbench autointerp --activations DIR...`` (the N folders) then counts
firings and collects evidence from the saved activations, batch by batch in corpus order, and goes on
as any run: its files equal an unsharded run's for SAEs whose chosen latents' activations equal the
full encoding's (TopK SAEs, the synthetic SAE; a standard or JumpReLU SAE's run encodes only the
chosen latents' columns of ``W_enc``, which may round differently in the last bit).

The saved files are read as untrusted input, refused with one line naming the file or folder: a file
that is not a regular file of at most :data:`MAX_BYTES`; members other than :func:`save_shard`'s, a
compressed member, one not exactly as long as its header's shape × itemsize, members longer together
than the file, more entries than the file's rows hold (rows × context × d_sae), all checked before a
member is read (so reading the shards takes about twice their size); another key, entries outside
the file's rows, negative or non-finite values, a (row, position, latent) entry repeated or out of
order; a set of folders that is not each of shards 0..N-1 once.
"""

from __future__ import annotations

import io
import json
import math
import re
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from findbench._io import atomic_write_bytes, read_untrusted_bytes
from findbench.constants import UsageError

#: Version of the saved layout.
FORMAT = 1
#: The largest activations file read (8 GiB: ~500M non-zero activations).
MAX_BYTES = 8 << 30
#: The largest meta member (a JSON text of a few hundred bytes when written).
META_MAX_BYTES = 64 << 10
#: The saved columns: 16 bytes per non-zero activation.
_COLUMNS = {"row": np.int32, "col": np.int32, "latent": np.int32, "value": np.float32}


def shard_rows(n_rows: int, batch_size: int, shard: tuple[int, int]) -> tuple[int, int]:
    """The ``(start, stop)`` corpus rows of ``shard`` ``(I, N)``: the I-th of N near-equal runs of whole batches."""
    index, count = shard
    n_batches = -(-n_rows // batch_size)
    start, stop = (i * n_batches // count * batch_size for i in (index, index + 1))
    return min(start, n_rows), min(stop, n_rows)


def shard_path(out: str | Path, key: str, shard: tuple[int, int]) -> Path:
    return Path(out) / f"activations_{key}_{shard[0]}of{shard[1]}.npz"


def save_shard(batches: Iterator[tuple[int, torch.Tensor]], path: Path, *, key: str, shard: tuple[int, int],
               rows: tuple[int, int], n_rows: int, d_sae: int, context: int) -> Path:
    """Write the non-zero entries of ``batches`` (:func:`findbench.autointerp.evidence.corpus_acts` of
    every latent over ``rows``) to ``path`` at once (atomically)."""
    parts: dict[str, list[np.ndarray]] = {name: [] for name in _COLUMNS}
    for first, acts in batches:
        acts = acts.cpu()
        r, c, lat = acts.nonzero(as_tuple=True)
        for name, values in (("row", r + first), ("col", c), ("latent", lat), ("value", acts[r, c, lat])):
            parts[name].append(values.numpy().astype(_COLUMNS[name]))
    meta = {"format": FORMAT, "key": key, "shard": list(shard), "rows": list(rows), "n_rows": n_rows, "d_sae": d_sae,
            "context": context}
    buf = io.BytesIO()
    np.savez(buf, meta=np.array(json.dumps(meta, sort_keys=True)),
             **{name: np.concatenate(p) if p else np.zeros(0, _COLUMNS[name]) for name, p in parts.items()})
    return atomic_write_bytes(path, buf.getvalue())


def _headers(npz: zipfile.ZipFile, size: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each member's declared ``(shape, dtype)``, read before any member is: the members of :func:`save_shard`
    only, each stored (not compressed) and exactly as long as its header declares, together within the file's
    ``size``; the meta member at most :data:`META_MAX_BYTES`. ValueError saying which does not hold."""
    infos = npz.infolist()
    if (names := sorted(info.filename for info in infos)) != sorted(f"{name}.npy" for name in ("meta", *_COLUMNS)):
        raise ValueError(f"members {names[:8]}, not {save_shard.__name__}'s")
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    out = {}
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise ValueError(f"member {info.filename} is compressed (refused: --token-shard stores its members)")
        with npz.open(info) as fh:
            shape, _, dtype = readers[np.lib.format.read_magic(fh)](fh)
            declared = fh.tell() + math.prod(shape) * dtype.itemsize
        if declared != info.file_size:
            raise ValueError(f"member {info.filename} declares {declared:,} bytes but holds {info.file_size:,}")
        out[info.filename[: -len(".npy")]] = (shape, dtype)
    if sum(info.file_size for info in infos) > size:
        raise ValueError(f"members declare {sum(info.file_size for info in infos):,} bytes, the file has {size:,}")
    meta_shape, meta_type = out["meta"]
    if meta_shape != () or meta_type.kind != "U" or meta_type.itemsize > META_MAX_BYTES:
        raise ValueError(f"member meta.npy is not a text of at most {META_MAX_BYTES:,} bytes")
    return out


def _member(npz: zipfile.ZipFile, name: str) -> np.ndarray:
    with npz.open(f"{name}.npy") as fh:
        return np.lib.format.read_array(fh, allow_pickle=False)


class SavedActivations:
    """The activations saved by the N ``--token-shard`` runs in ``dirs`` for ``key``, checked as
    untrusted input (module docstring), read back as :func:`~findbench.autointerp.evidence.corpus_acts` gives them."""

    def __init__(self, dirs: Sequence[str | Path], *, key: str, n_rows: int, d_sae: int, context: int) -> None:
        self.n_rows, self.d_sae, self.context = n_rows, d_sae, context
        found: dict[int, tuple[Path, dict, dict[str, np.ndarray]]] = {}
        count = None
        for folder in map(Path, dirs):  # (each a folder: AutoInterpCommand checks)
            files = sorted(folder.glob(f"activations_{key}_*of*.npz"))
            if len(files) != 1:
                raise UsageError(f"--activations: {folder} " + (
                    "holds several shards" if files else
                    "holds shards of other settings (model, SAE, hook, corpus or --batch-size)"
                    if any(folder.glob("activations_*.npz")) else "holds no --token-shard activations"))
            meta, arrays = self._read(files[0], key)
            index, n = meta["shard"]
            if count is not None and n != count:
                raise UsageError(f"--activations: {files[0]} is shard {index}/{n}, the others are of {count}")
            if index in found:
                raise UsageError(f"--activations: shard {index}/{n} twice ({found[index][0]}, {files[0]})")
            count = n
            found[index] = (files[0], meta, arrays)
        missing = sorted(set(range(count or 0)) - set(found))
        if not dirs or missing:
            raise UsageError(f"--activations: shards {missing} of {count} are missing" if missing else
                             "--activations: no folder given")
        self.rows, self.cols, self.latents, self.values = (
            np.concatenate([found[i][2][name] for i in range(count)]) for name in _COLUMNS)
        stops = [found[i][1]["rows"] for i in range(count)]
        if stops[0][0] != 0 or stops[-1][1] != n_rows or any(a[1] != b[0] for a, b in zip(stops, stops[1:])):
            raise UsageError(f"--activations: the shards' rows {stops} do not cover the corpus's {n_rows} rows once")

    def _read(self, path: Path, key: str) -> tuple[dict, dict[str, np.ndarray]]:
        data = read_untrusted_bytes(path, MAX_BYTES, "--activations file")
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as npz:
                headers = _headers(npz, len(data))
                meta = json.loads(str(_member(npz, "meta")))
                start, stop = self._check_meta(path, meta, key)
                n = headers["row"][0][0] if len(headers["row"][0]) == 1 else -1
                if any(headers[k] != ((n,), np.dtype(t)) for k, t in _COLUMNS.items()) \
                        or n > (stop - start) * self.context * self.d_sae:
                    raise UsageError(f"--activations: {path} declares columns of other types, lengths or more "
                                     f"entries than its rows {start}..{stop - 1} hold")
                arrays = {name: _member(npz, name) for name in _COLUMNS}
        except UsageError:
            raise
        except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise UsageError(f"--activations: {path} is not a --token-shard activations file ({exc})") from None
        del data
        row, col, lat, value = (arrays[name] for name in _COLUMNS)
        if n and (row.min() < start or row.max() >= stop or col.min() < 0 or col.max() >= self.context
                  or lat.min() < 0 or lat.max() >= self.d_sae or not np.isfinite(value).all()):
            raise UsageError(f"--activations: {path} has entries of the wrong type or outside its rows, "
                             f"{self.context} columns or {self.d_sae} latents")
        if n and value.min() < 0:
            raise UsageError(f"--activations: {path} has negative activations (an SAE's latents are >= 0)")
        # save_shard writes (row, position, latent) in increasing order: a repeated entry breaks it
        where = ((row - start).astype(np.int64) * self.context + col) * self.d_sae + lat
        if n > 1 and not (where[1:] > where[:-1]).all():
            raise UsageError(f"--activations: {path} has (row, position, latent) entries repeated or out of order")
        return meta, arrays

    def _check_meta(self, path: Path, meta: Any, key: str) -> tuple[int, int]:
        """The ``(start, stop)`` rows of a file whose meta records ``key``, this run's sizes and its name's shard."""
        m = re.fullmatch(r"activations_[0-9a-f]+_(\d+)of(\d+)\.npz", path.name)
        expected = {"format": FORMAT, "key": key, "n_rows": self.n_rows, "d_sae": self.d_sae, "context": self.context}
        if not isinstance(meta, dict) or any(meta.get(k) != v for k, v in expected.items()) or not m \
                or meta.get("shard") != [int(m[1]), int(m[2])]:
            raise UsageError(f"--activations: {path} records other settings than its name and this run's")
        rows = meta.get("rows")
        if not (isinstance(rows, list) and len(rows) == 2 and all(type(x) is int for x in rows)
                and 0 <= rows[0] <= rows[1] <= self.n_rows):
            raise UsageError(f"--activations: {path} records rows {rows!r}, not a range of the {self.n_rows} rows")
        return rows[0], rows[1]

    def counts(self) -> np.ndarray:
        """How many positions each latent fires on (as :func:`~findbench.autointerp.evidence.count_firing`)."""
        return np.bincount(self.latents[self.values > 0], minlength=self.d_sae).astype(np.int64)

    def batches(self, latents: Sequence[int], batch_size: int) -> Iterator[tuple[int, torch.Tensor]]:
        """``(first row, acts [rows, context, len(latents)])`` per batch, in corpus order."""
        where = np.full(self.d_sae, -1, dtype=np.int64)
        where[np.asarray(list(latents), dtype=np.int64)] = np.arange(len(latents))
        for first in range(0, self.n_rows, batch_size):
            last = min(first + batch_size, self.n_rows)
            lo, hi = np.searchsorted(self.rows, [first, last])
            pos = where[self.latents[lo:hi]]
            keep = pos >= 0
            acts = torch.zeros((last - first, self.context, len(latents)))
            index = (self.rows[lo:hi][keep] - first, self.cols[lo:hi][keep], pos[keep])
            acts[tuple(torch.from_numpy(i.astype(np.int64)) for i in index)] = torch.from_numpy(
                self.values[lo:hi][keep])
            yield first, acts
