"""Summarize a CSV/TSV file: per column its type, empty cells, distinct values, numeric range
and mean, and the most common text values. Standard library only."""

import argparse
import csv
import math
import sys
from collections import Counter
from datetime import date

MAX_DISTINCT = 10000
DELIMITERS = {",": ",", ";": ";", "tab": "\t", "\\t": "\t", "|": "|"}


class Column:
    def __init__(self, name):
        self.name = name
        self.empty = 0
        self.values = Counter()
        self.overflow = False
        self.numbers = 0
        self.dates = 0
        self.total = 0.0
        self.low = math.inf
        self.high = -math.inf

    def add(self, cell):
        cell = cell.strip()
        if not cell:
            self.empty += 1
            return
        if not self.overflow:
            self.values[cell] += 1
            if len(self.values) > MAX_DISTINCT:
                self.overflow = True
        number = parse_number(cell)
        if number is not None:
            self.numbers += 1
            self.total += number
            self.low = min(self.low, number)
            self.high = max(self.high, number)
        elif is_date(cell):
            self.dates += 1

    def filled(self, rows):
        return rows - self.empty

    def kind(self, rows):
        filled = self.filled(rows)
        if filled == 0:
            return "empty"
        if self.numbers == filled:
            return "number"
        if self.dates == filled:
            return "date"
        return "text"


def parse_number(cell):
    text = cell.replace("_", "")
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def is_date(cell):
    try:
        date.fromisoformat(cell[:10])
        return True
    except ValueError:
        return False


def fmt(value):
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def guess_delimiter(first_line):
    counts = {d: first_line.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=counts.get)
    return best if counts[best] > 0 else ","


def cell_text(text):
    return text.replace("|", "\\|").replace("\n", " ")[:40]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path")
    parser.add_argument("--delimiter")
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--max-rows", type=int, default=1_000_000)
    parser.add_argument("--no-header", action="store_true")
    args = parser.parse_args()
    top = max(0, min(args.top, 20))

    with open(args.path, newline="", encoding="utf-8", errors="replace") as handle:
        first = handle.readline()
        handle.seek(0)
        if args.delimiter:
            if args.delimiter not in DELIMITERS:
                sys.exit(f"unknown delimiter {args.delimiter!r}; use , ; tab or |")
            delimiter = DELIMITERS[args.delimiter]
        else:
            delimiter = guess_delimiter(first)
        reader = csv.reader(handle, delimiter=delimiter)
        header = None if args.no_header else next(reader, None)
        columns = [Column(name or f"col{i + 1}") for i, name in enumerate(header or [])]
        rows = 0
        ragged = 0
        for record in reader:
            if rows >= args.max_rows:
                break
            rows += 1
            while len(columns) < len(record):
                columns.append(Column(f"col{len(columns) + 1}"))
            if header is not None and len(record) != len(header):
                ragged += 1
            for column, cell in zip(columns, record):
                column.add(cell)
            for column in columns[len(record):]:
                column.empty += 1

    name = "tab" if delimiter == "\t" else delimiter
    print(f"**{args.path}** — {rows} data rows, {len(columns)} columns, delimiter `{name}`")
    if ragged:
        print(f"\n{ragged} rows have a different number of cells than the header.")
    print()
    print("| column | type | empty | distinct | min | max | mean | most common |")
    print("|---|---|---|---|---|---|---|---|")
    for column in columns:
        kind = column.kind(rows)
        distinct = f">{MAX_DISTINCT}" if column.overflow else str(len(column.values))
        low = high = mean = ""
        if kind == "number":
            low, high = fmt(column.low), fmt(column.high)
            mean = fmt(column.total / max(column.numbers, 1))
        common = ""
        if kind in ("text", "date") and top:
            common = ", ".join(
                f"{cell_text(value)} ({count})" for value, count in column.values.most_common(top)
            )
        print(
            f"| {cell_text(column.name)} | {kind} | {column.empty} | {distinct} | {low} | {high} "
            f"| {mean} | {common} |"
        )


if __name__ == "__main__":
    main()
