"""Numbers and records for people: one place for the report (Markdown, HTML) and the service's pages.

A figure is a value, a unit and, when measured, its 95 % interval: ``58.1 [55.0, 61.2] req/s``. At most
four significant figures are shown (downloads keep every digit); a projected figure keeps its label. The
record helpers (host probe, offered load, accuracy, provenance) turn the documents' nested parts into short
labelled lines, so no page prints a dict or a JSON object. Pure: data in, text out.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

DIGITS = 4  # significant figures shown anywhere but in a download


def num(value: float | int | None, digits: int = DIGITS) -> str:
    """``value`` to ``digits`` significant figures, thousands separated: 1238.02 → ``1,238``, 12345.6 →
    ``12,350``, 0.012345 → ``0.01235``; whole numbers below 10,000 stay whole. None → ``—``."""
    if value is None:
        return "—"
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude >= digits - 1:  # no decimals left: round to the figures kept, then separate thousands
        scale = 10 ** (magnitude - digits + 1)  # half away from zero (round() would give 12,340 for 12,345)
        return f"{math.copysign(math.floor(abs(value) / scale + 0.5) * scale, value):,.0f}"
    if magnitude < -4:
        return f"{value:.{digits}g}"
    return f"{value:.{digits}g}" if magnitude >= 0 else f"{value:.{digits - 1 - magnitude}f}".rstrip("0")


# a number standing on its own in free text: not part of a word, a hash, a version (2.11.0), a date, a time
_LOOSE_NUMBER = re.compile(r"(?<![\w.:/\-#@])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\w.:/\-]|\.\d)")


def significant_figures(token: str) -> int:
    """How many significant figures a written number shows: ``74.49392`` → 7, ``12,350`` → 4."""
    whole, _, frac = token.replace(",", "").partition(".")
    if frac:
        return len((whole + frac).lstrip("0"))
    return len(whole.lstrip("0").rstrip("0")) or 1


def round_in_text(text: str) -> str:
    """Free text (a catalog's price note, a reason) with numbers cut to four significant figures:
    ``GPU 74.49392 + host 12.266`` → ``GPU 74.49 + host 12.27``; the catalog keeps the exact text."""

    def cut(m: re.Match[str]) -> str:
        token = m.group(1)
        return num(float(token.replace(",", ""))) if significant_figures(token) > DIGITS else token

    return _LOOSE_NUMBER.sub(cut, text)


def with_interval(
    value: float | None,
    low: float | None,
    high: float | None,
    *,
    kind: str = "measured",
    scale: float = 1.0,
    prefix: str = "",
    unit: str = "",
) -> str:
    """``58.1 [55.0, 61.2]`` for a measured number and its 95 % interval (``open`` where no order statistic
    bounds it); a projected number keeps its label and shows a range, never a measured-looking interval.
    ``unit`` follows the whole figure: ``58.1 [55.0, 61.2] req/s``."""
    if value is None:
        return "—"
    tail = f" {unit}" if unit else ""

    def one(v: float | None, missing: str) -> str:
        return missing if v is None else prefix + num(v / scale)

    text = prefix + num(value / scale)
    if kind == "projected":
        if low is None and high is None:
            return f"{text}{tail} (proj)"
        return f"{text}{tail} (proj, range {one(low, '?')}–{one(high, '?')})"
    if low is None and high is None:
        return text + tail
    return f"{text} [{one(low, 'open')}, {one(high, 'open')}]{tail}"


def percent(fraction: float | None, digits: int = 3) -> str:
    """0.00123 → ``0.123 %``; 0 → ``0 %``."""
    return "—" if fraction is None else f"{num(fraction * 100, digits)} %"


def size_bytes(value: float | None) -> str:
    """Bytes in binary units: 150754820096 → ``140.4 GiB``."""
    if value is None:
        return "—"
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    size, i = float(value), 0
    while abs(size) >= 1024 and i < len(units) - 1:
        size, i = size / 1024, i + 1
    return f"{num(size)} {units[i]}"


def duration_s(value: float | None) -> str:
    return "—" if value is None else f"{num(value)} s"


def latency_ms(value_us: float | None, low_us: float | None = None, high_us: float | None = None) -> str:
    """A latency recorded in µs, shown in ms with its interval: ``12.3 [11.9, 12.8] ms``."""
    return with_interval(value_us, low_us, high_us, scale=1000.0, unit="ms")


def when(value: Any) -> str:
    """An ISO time as ``2026-11-30 00:21 UTC`` (pages; a download keeps the ISO text)."""
    if not value:
        return "—"
    text = str(value.isoformat() if hasattr(value, "isoformat") else value).replace("T", " ")
    tail = text[16:]
    if tail.endswith(("+00:00", "Z")) or len(text) <= 16:
        return text[:16] + " UTC"
    offset = tail[-6:] if len(tail) >= 6 and tail[-6] in "+-" and tail[-3] == ":" else ""
    return text[:16] + (f" UTC{offset}" if offset else "")


# ---------------------------------------------------------------- records
def offered_text(offered: Mapping[str, Any] | None) -> str:
    """A step's offered load: ``concurrency 8``, ``100 req/s Poisson`` (what the load generator sent)."""
    offered = dict(offered or {})
    if offered.get("concurrency") is not None:
        text = f"concurrency {num(offered.pop('concurrency'))}"
    elif offered.get("rate_rps") is not None:
        text = f"{num(offered.pop('rate_rps'))} req/s Poisson"
    else:
        text = ""
    extra = [f"{k.replace('_', ' ')} {_scalar(v)}" for k, v in sorted(offered.items()) if v is not None]
    return ", ".join(p for p in [text, *extra] if p) or "—"


def _scalar(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "—"}[value]
    if isinstance(value, (int, float)):
        return num(value)
    return str(value)


def _block(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """A nested block of a record, or an empty one when it is absent or not a block."""
    value = record.get(key)
    return value if isinstance(value, Mapping) else {}


def host_summary(probe: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(label, text) lines of a host probe: CPU model and cores, GPUs (names and count), memory, OS.

    Reads both shapes accelbench writes: ``accelbench probe`` (cpu, gpus, memory_total_bytes, os) and the
    load generator's short one (hostname, platform, machine, cpu_count)."""
    probe = probe or {}
    if not probe:  # an import: the file does not say where it was measured
        return [("host", "not recorded")]
    cpu = _block(probe, "cpu")
    lines: list[tuple[str, str]] = []
    if probe.get("hostname"):
        lines.append(("hostname", str(probe["hostname"])))
    cores = (
        cpu.get("cores_physical") or cpu.get("cores_logical") or probe.get("cpu_count") or probe.get("cores")
    )
    logical = cpu.get("cores_logical") or probe.get("cpu_count") or probe.get("cores")
    named = probe.get("cpu") if isinstance(probe.get("cpu"), str) else None  # an older probe's one string
    cpu_text = str(cpu.get("model") or named or probe.get("machine") or "unknown")
    if cores:
        cpu_text += f", {cores} cores" + (f" ({logical} logical)" if logical and logical != cores else "")
    lines.append(("CPU", cpu_text))
    gpus = probe.get("gpus") or (probe.get("nvidia") or {}).get("gpus") or []
    if gpus:
        names: dict[str, int] = {}
        for gpu in gpus:
            names[str(gpu.get("name") or "GPU")] = names.get(str(gpu.get("name") or "GPU"), 0) + 1
        text = ", ".join(f"{n} × {name}" for name, n in names.items())
        memory = gpus[0].get("memory_total_bytes")
        lines.append(("GPUs", text + (f" ({size_bytes(memory)} each)" if memory else "")))
    else:
        lines.append(("GPUs", "none"))
    if probe.get("memory_total_bytes"):
        lines.append(("memory", size_bytes(probe["memory_total_bytes"])))
    os_info = _block(probe, "os")
    os_text = os_info.get("distribution") or os_info.get("platform") or probe.get("platform")
    if os_text:
        release = os_info.get("release")
        lines.append(
            ("OS", str(os_text) + (f" (kernel {release})" if release and release not in os_text else ""))
        )
    driver = (probe.get("nvidia") or {}).get("driver_version")
    if driver:
        lines.append(
            ("NVIDIA driver", f"{driver}, CUDA {(probe.get('nvidia') or {}).get('cuda_driver_version')}")
        )
    return lines


def host_label(probe: Mapping[str, Any] | None) -> str:
    """One short phrase for a table cell: ``vm: 2 × AMD EPYC…`` or ``1 × NVIDIA H200, Intel Xeon (16 cores)``."""
    lines = dict(host_summary(probe))
    if "host" in lines:
        return lines["host"]
    gpu = lines.get("GPUs", "none")
    parts = [lines["hostname"]] if "hostname" in lines else []
    parts.append(gpu if gpu != "none" else lines.get("CPU", "unknown"))
    if gpu != "none":
        parts.append(lines.get("CPU", ""))
    return "; ".join(p for p in parts if p)


def flatten(record: Any, prefix: str = "") -> list[tuple[str, str]]:
    """A nested record as (dotted key, text) rows, numbers to four figures and ``*_bytes`` in binary units:
    the full host probe on a page, readable and without a JSON repr."""
    if isinstance(record, Mapping):
        out: list[tuple[str, str]] = []
        for key in sorted(record):
            out += flatten(record[key], f"{prefix}.{key}" if prefix else str(key))
        return out or [(prefix, "—")]
    if isinstance(record, (list, tuple)):
        if all(not isinstance(v, (Mapping, list, tuple)) for v in record):
            return [(prefix, ", ".join(_scalar(v) for v in record) or "—")]
        return [row for i, v in enumerate(record) for row in flatten(v, f"{prefix}[{i}]")]
    if prefix.endswith("_bytes") and isinstance(record, (int, float)) and not isinstance(record, bool):
        return [(prefix, size_bytes(record))]
    return [(prefix, _scalar(record))]


def accuracy_rows(accuracy: Mapping[str, Any] | None) -> list[tuple[str, str, str, str]]:
    """(metric, value, threshold, verdict) of an accuracy gate; empty when none was recorded."""
    if not accuracy:
        return []
    a = dict(accuracy)
    threshold = "—"
    if a.get("tolerance") is not None:
        threshold = f"within {num(a['tolerance'])} of FP32"
        if a.get("worst") is not None:
            threshold += f" (worst sample {num(a['worst'])})"
    value = num(a.get("value")) if a.get("value") is not None else "not measured"
    verdict = str(a.get("verdict") or "NOT_RUN") + (f": {a['reason']}" if a.get("reason") else "")
    return [(str(a.get("metric") or "—"), value, threshold, verdict)]


def packages_text(packages: Mapping[str, Any] | None) -> str:
    """``numpy 2.5.2, torch 2.11.0``; packages recorded as absent are left out."""
    items = [f"{k} {v}" for k, v in sorted((packages or {}).items()) if v and v != "not installed"]
    return ", ".join(items) or "—"


def provenance_items(provenance: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(term, text) pairs of a result's provenance for a definition list (the host has its own summary)."""
    p = dict(provenance or {})
    server = p.get("server") or {}
    imported = p.get("imported_from") or {}
    items = [
        ("created", p.get("created_at") and when(p["created_at"])),
        ("command", p.get("command")),
        ("packages", packages_text(p.get("packages"))),
        (
            "server",
            " ".join(
                str(x)
                for x in (server.get("url"), server.get("version") and f"(Triton {server['version']})")
                if x
            ),
        ),
        ("method", p.get("method")),
        (
            "imported from",
            imported and f"{imported.get('file')} (sha256 {str(imported.get('sha256'))[:12]}…)",
        ),
        ("manifest hash", p.get("manifest_hash")),
        ("note", p.get("note")),
    ]
    return [(term, str(text)) for term, text in items if text]


def attempts_text(step: Any, reasons: bool = True) -> str:
    """How many times a step was measured and what the earlier attempts were judged: ``1``, or
    ``2 (attempt 1 INVALID: drift …)``; without ``reasons`` (a page that lists them apart) ``2 (1 INVALID)``."""
    earlier = list(getattr(step, "earlier_attempts", None) or [])
    if not earlier:
        return "1"
    if reasons:
        past = "; ".join(
            f"attempt {e.attempt or i + 1} {e.verdict}: {'; '.join(e.reasons or []) or 'no reason'}"
            for i, e in enumerate(earlier)
        )
    else:
        verdicts = [e.verdict for e in earlier]
        past = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts)) + " before"
    return f"{getattr(step, 'attempt', None) or len(earlier) + 1} ({past})"


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A value as a CSV cell: None empty, a float with every digit, and text a spreadsheet would run as a
    formula (``=HYPERLINK(...)`` as a model name) prefixed with a single quote (OWASP "CSV Injection").
    Numbers are never prefixed: a negative number stays a number."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A table as CSV (a download: every digit kept, no formula, see ``csv_cell``)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([csv_cell(h) for h in headers])
    for row in rows:
        writer.writerow([csv_cell(v) for v in row])
    return buf.getvalue()


# the names templates use (the service's Jinja environments register these as filters)
FILTERS = {
    "num": num,
    "with_interval": with_interval,
    "percent": percent,
    "size_bytes": size_bytes,
    "latency_ms": latency_ms,
    "offered_text": offered_text,
    "host_label": host_label,
    "when": when,
}
