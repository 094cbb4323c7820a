#!/usr/bin/env python3
"""The records and the docs against the code: what CI can check of them without a GPU.

    python3 test/records/check_records.py SOURCE_DIR [CHECK ...]

Checks (all by default; each prints one line per finding and the script exits non-zero on any):
  results    every file of bench/results/ names one and the same commit (a text file in its first line,
             a JSON file in its "commit" field, a PNG in its text chunk), and no file lies in a sub-folder
  file_map   docs/architecture.md's "File map" lists every header under include/pagedattn/ by its path
             there, lists no other file, and each backticked name of a row appears in that row's header
  names      every backticked pagedattn::Name or detail::Name in docs/ is declared under include/
  notes      every citation of bench/NOTES.md by a quoted section title names a section that exists
  journal    no tracked file (but the verbatim pytest log) speaks of its work periods, issue numbers or branches
"""
import json
import pathlib
import re
import subprocess
import sys
import zlib

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
INCLUDE = ROOT / "include" / "pagedattn"
PYTEST_LOG = re.compile(r"^bench/results/[a-z0-9-]+-python-tests\.txt$")


def tracked_files():
    """The repository's files: git's list where there is one, else every file outside build folders."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True).stdout
        return [p for p in out.splitlines() if (ROOT / p).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = re.compile(r"^(build[^/]*|\.git|\.deps|out|python/build)/")
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and not skip.match(str(p.relative_to(ROOT)))]


def code_text(path):
    """A header with its comments and string literals removed: what it declares, not what it says."""
    text = path.read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def png_text_chunks(path):
    data, chunks, pos = path.read_bytes(), {}, 8
    while pos + 8 <= len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"tEXt" and b"\0" in body:
            key, value = body.split(b"\0", 1)
            chunks[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt" and b"\0" in body:
            key, rest = body.split(b"\0", 1)
            chunks[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt" and b"\0" in body:
            key, rest = body.split(b"\0", 1)
            compressed, rest = rest[0], rest[2:]
            rest = rest.split(b"\0", 2)[2]
            chunks[key.decode("latin-1")] = (zlib.decompress(rest) if compressed else rest).decode("utf-8")
        pos += 12 + length
    return chunks


COMMIT = re.compile(r"\bcommit[ =:]+([0-9a-f]{7,40})\b")


def commit_named_by(path):
    if path.suffix == ".json":
        value = json.loads(path.read_text()).get("commit")
        return str(value) if value else None
    if path.suffix == ".png":
        m = COMMIT.search(" ".join(png_text_chunks(path).values()))
        return m.group(1) if m else None
    lines = path.read_text(errors="replace").splitlines()
    m = COMMIT.search(lines[0]) if lines else None
    return m.group(1) if m else None


def check_results():
    results = ROOT / "bench" / "results"
    files = sorted(p for p in results.rglob("*") if p.is_file())
    if not files:
        yield "bench/results/ holds no run of record"
    commits = {}
    for p in files:
        rel = p.relative_to(ROOT)
        if p.parent != results:
            yield f"{rel}: bench/results/ holds one run of record, in no sub-folder"
            continue
        commit = commit_named_by(p)
        if commit is None:
            yield f"{rel}: names no commit (a text file's first line, a JSON file's \"commit\", a PNG's text chunk)"
        else:
            commits[str(rel)] = commit
    # One commit, however abbreviated: every name is a prefix of the longest.
    if commits:
        longest = max(commits.values(), key=len)
        for rel, commit in commits.items():
            if not longest.startswith(commit):
                yield f"{rel}: commit {commit}, but {next(r for r, c in commits.items() if c == longest)} names {longest}"


def check_file_map():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    m = re.search(r"^## File map\n(.*?)(?=^## |\Z)", doc, flags=re.S | re.M)
    if not m:
        yield "docs/architecture.md has no '## File map' section"
        return
    headers = {str(p.relative_to(INCLUDE)) for p in INCLUDE.rglob("*.cuh")}
    listed = set()
    for row in m.group(1).splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")] if row.startswith("|") else []
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        path = cells[0].strip("`")
        listed.add(path)
        if path not in headers:
            yield f"docs/architecture.md, File map: `{path}` is no header under include/pagedattn/"
            continue
        code = code_text(INCLUDE / path)
        for token in re.findall(r"`([^`]+)`", "|".join(cells[1:])):
            name = re.match(r"(?:pagedattn::)?(?:detail::)?([A-Za-z_]\w*)", token)
            if name and not re.search(r"\b" + re.escape(name.group(1)) + r"\b", code):
                yield f"docs/architecture.md, File map: `{token}` is not declared in {path}"
    for path in sorted(headers - listed):
        yield f"docs/architecture.md, File map: include/pagedattn/{path} is not listed"


def check_names():
    code = " ".join(code_text(p) for p in INCLUDE.rglob("*.cuh"))
    words = set(re.findall(r"[A-Za-z_]\w*", code))
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for span in re.findall(r"`([^`\n]+)`", doc.read_text()):
            for qualified in re.findall(r"\b(?:pagedattn|detail)::[A-Za-z_][\w:]*", span):
                if qualified.endswith(":") and not qualified.endswith("::"):
                    continue  # an error message's prefix, e.g. `pagedattn::Decode:`
                parts = [p for p in qualified.split("::") if p not in ("pagedattn", "detail", "")]
                missing = [p for p in parts if p not in words]
                if missing:
                    yield f"{doc.relative_to(ROOT)}: `{qualified}`: {', '.join(missing)} declared nowhere under include/"


def check_notes():
    notes = ROOT / "bench" / "NOTES.md"
    titles = set(re.findall(r"^## (.+?)\s*$", notes.read_text(), flags=re.M)) if notes.exists() else set()
    for rel in tracked_files():
        if rel.startswith("bench/results/") or not rel.endswith((".cuh", ".cu", ".cpp", ".h", ".py", ".sh", ".md", ".txt", ".cmake")):
            continue
        text = (ROOT / rel).read_text(errors="replace")
        # A citation may break across comment lines: join them first.
        flat = re.sub(r"\s*\n\s*(?://+|#+|\*)?\s*", " ", text)
        for title in re.findall(r"NOTES\.md,? \"([^\"]+)\"", flat):
            if title not in titles:
                yield f"{rel}: cites bench/NOTES.md, \"{title}\": no such section"
        for old in re.findall(r"NOTES\.md,? (?:v\d+|[Ss]ession \d+)", flat):
            yield f"{rel}: cites bench/NOTES.md by an old heading ({old}); cite a section by its quoted title"


# A work period's name (spelt in two pieces, so that this file passes the grep it stands for), an issue number
# (not "cycles/issue 10.6", Nsight Compute's rate), a branch.
JOURNAL = re.compile(r"\bsess" r"ions?\b|(?<![/\w])issue[ -]?#?\d+(?![.\d])|\bissue\d+-|\bbranch `", re.I)


def check_journal():
    for rel in tracked_files():
        if PYTEST_LOG.match(rel):
            continue
        words = [m.group(0) for m in JOURNAL.finditer(rel)]
        try:
            for n, line in enumerate((ROOT / rel).read_text().splitlines(), 1):
                words += [f"line {n}: {m.group(0)}" for m in JOURNAL.finditer(line)]
        except UnicodeDecodeError:
            pass  # a binary file: its name was checked
        for w in words[:3]:
            yield f"{rel}: {w} (the project speaks of itself, not of its work periods, issues or branches)"


CHECKS = {"results": check_results, "file_map": check_file_map, "names": check_names, "notes": check_notes,
          "journal": check_journal}

if __name__ == "__main__":
    chosen = sys.argv[2:] or list(CHECKS)
    failures = 0
    for name in chosen:
        findings = list(CHECKS[name]())
        for f in findings:
            print(f"{name}: {f}")
        print(f"{name}: {'ok' if not findings else f'{len(findings)} finding(s)'}")
        failures += len(findings)
    sys.exit(1 if failures else 0)
