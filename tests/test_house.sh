#!/usr/bin/env bash
# tests/test_house.sh - the implementation keeps the shape DESIGN.md gives it, as zero.h changes:
#   public_functions_thin   every ZERO_API function is defined in >>public, and no function
#                           there is longer than 30 lines (argument checks and one call into
#                           the region that owns the work)
#   no_calls_down           a region calls only functions defined in the regions above it,
#                           but for the forward declarations its table of contents names
#                           (and each one named is still needed)
#   backends_sealed         no code outside >>device names a device table (zero__cuda_dev,
#                           ...), none outside >>comm compares with a comm table, and
#                           #if ZERO_CUDA / ZERO_MPI appears only in >>platform, >>device, >>comm
#   tables_by_name          every backend table (ZERO__VT_BEGIN ... ZERO__VT_END) sets its
#                           fields by name (ZERO__VT_SET), none is filled by position
# One PASS/FAIL line per check; exit 1 on any failure. Run from the repository root
# (tests/run_tests.sh tests/test_house.sh); ZERO_H=path checks another copy of zero.h;
# ZERO_HOUSE_REPORT=1 also prints the region table (tag, first line, lines) and the ten
# longest functions, and the five longest in >>public.
set -u
H=${ZERO_H:-zero.h}
[ -f "$H" ] || { echo "FAIL setup: $H not found (run from the repository root)"; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP house: python3 is not installed"; exit 0; }

python3 - "$H" <<'EOF'
import os, re, sys

path = sys.argv[1]
raw = open(path, encoding='utf-8', errors='replace').read()
failed = False

def report(name, problems):
    global failed
    if problems:
        failed = True
        more = ' (+%d more)' % (len(problems) - 8) if len(problems) > 8 else ''
        print('FAIL %s: %s%s' % (name, '; '.join(problems[:8]), more))
    else:
        print('PASS %s' % name)

def blank_comments_and_strings(t):
    """the text with comments and string/char literals blanked out, lines kept"""
    out, i, n = [], 0, len(t)
    while i < n:
        if t.startswith('/*', i):
            j = t.find('*/', i + 2); j = n if j < 0 else j + 2
            out.append(''.join(c if c == '\n' else ' ' for c in t[i:j])); i = j
        elif t.startswith('//', i):
            j = t.find('\n', i); j = n if j < 0 else j
            out.append(' ' * (j - i)); i = j
        elif t[i] in '"\'':
            q, j = t[i], i + 1
            while j < n and t[j] != q and t[j] != '\n':
                j += 2 if t[j] == '\\' else 1
            out.append(q + ' ' * (j - i - 1) + q); i = j + 1
        else:
            out.append(t[i]); i += 1
    return ''.join(out)

lines = raw.split('\n')
code = blank_comments_and_strings(raw).split('\n')
impl = next((i for i, l in enumerate(lines) if l.startswith('#define ZERO__IMPL_DEFINED')), None)
if impl is None:
    print('FAIL setup: no #define ZERO__IMPL_DEFINED in %s' % path); sys.exit(1)

# the regions: /* >>tag headers of the implementation, in order
regions = [(m.group(1), i) for i, l in enumerate(lines) if i > impl for m in [re.match(r'/\* >>([a-z]+)', l)] if m]
if len(regions) < 2:
    print('FAIL setup: no >>tag regions in %s' % path); sys.exit(1)
order = {t: k for k, (t, _) in enumerate(regions)}
def region_of(i):
    r = None
    for t, s in regions:
        if s <= i: r = t
    return r

# function definitions: a line at column 0 naming zero_*( that opens a body ending at a '}' at column 0
defs = {}
defre = re.compile(r'^(?![\s#}]|typedef|struct\s+\w+\s*\{)[^;=]*?\b(zero_\w+)\s*\(')
i = regions[0][1]
while i < len(code):
    m = defre.match(code[i])
    if m and not code[i].rstrip().endswith(';'):
        j = i
        while j < len(code) and '{' not in code[j] and not code[j].rstrip().endswith(';'):
            j += 1
        if j < len(code) and '{' in code[j]:
            k = j
            if not (code[j].rstrip().endswith('}') and code[j].count('{') == code[j].count('}')):
                k = j + 1
                while k < len(code) and not code[k].startswith('}'):
                    k += 1
            defs.setdefault(m.group(1), (i, k, region_of(i)))
            i = k + 1
            continue
    i += 1

# --- public_functions_thin ------------------------------------------------------------
long_ones = ['%s (%d lines, line %d)' % (n, k - i + 1, i + 1) for n, (i, k, r) in sorted(defs.items())
             if r == 'public' and k - i + 1 > 30]
long_ones += ['%s is defined in >>%s' % (n, r) for n, (i, k, r) in sorted(defs.items())
              if r != 'public' and lines[i].startswith('ZERO_API')]
report('public_functions_thin', long_ones)

# --- no_calls_down ----------------------------------------------------------------------
# the forward declarations the table of contents names: the zero__ identifiers of its
# sentences that say "forward declaration"
toc_end = next(i for i in range(impl, len(lines)) if lines[i].rstrip().endswith('*/'))
toc = ' '.join(l.strip() for l in lines[impl:toc_end + 1])
named = set()
for sentence in re.split(r'\.\s', toc):
    if 'forward declaration' in sentence:
        named.update(re.findall(r'\bzero__\w+', sentence))
idre = re.compile(r'(?<!struct )\b(zero_\w+)\b')
down = {}
for name, (i, k, r) in defs.items():
    for ln in range(i, k + 1):
        for callee in idre.findall(code[ln]):
            if callee != name and callee in defs and order[defs[callee][2]] > order[r]:
                down.setdefault(callee, set()).add('%s (>>%s) -> %s (>>%s)' % (name, r, callee, defs[callee][2]))
problems = sorted(c for callee, cs in down.items() if callee not in named for c in cs)
problems += ['the contents name %s as a forward declaration, but no region above it calls it' % n
             for n in sorted(named) if n not in down]
report('no_calls_down', problems)

# --- backends_sealed ----------------------------------------------------------------------
problems = []
for i in range(regions[0][1], len(code)):
    r, l = region_of(i), code[i]
    for t in re.findall(r'\bzero__(?:cpu|emu|cuda)_dev\b', l):
        if r != 'device':
            problems.append('line %d (>>%s) names %s' % (i + 1, r, t))
    for t in re.findall(r'[!=]=\s*&\s*(zero__\w+_vt)\b', l):
        if r != 'comm':
            problems.append('line %d (>>%s) compares with %s' % (i + 1, r, t))
    if re.match(r'\s*#\s*(if|ifdef|ifndef|elif)\b.*\bZERO_(CUDA|MPI)\b', lines[i]) and \
       r not in ('platform', 'device', 'comm'):
        problems.append('line %d (>>%s): %s' % (i + 1, r, lines[i].strip()))
report('backends_sealed', problems)

# --- tables_by_name -----------------------------------------------------------------------
problems = []
for m in re.finditer(r'^static\s+const\s+(zero__\w+_vt)\s+(\w+)\s*=\s*\{', '\n'.join(code), re.M):
    problems.append('%s %s is filled by position' % (m.group(1), m.group(2)))
joined = '\n'.join(l for l in code if not l.lstrip().startswith('#'))
tables = re.findall(r'ZERO__VT_BEGIN\((\w+),\s*(\w+)\)(.*?)ZERO__VT_END\(\1,\s*\2\)', joined, re.S)
for typ, name, body in tables:
    rest = re.sub(r'ZERO__VT_SET\(\s*\w+\s*,[^()]*(?:\([^()]*\)[^()]*)*\)', '', body)
    if rest.strip():
        problems.append('%s has entries not set by name: %s' % (name, ' '.join(rest.split())[:60]))
if len(tables) < 3:
    problems.append('only %d backend tables found (ZERO__VT_BEGIN ... ZERO__VT_END)' % len(tables))
report('tables_by_name', problems)

if os.environ.get('ZERO_HOUSE_REPORT'):
    for k, (t, st) in enumerate(regions):
        end = regions[k + 1][1] if k + 1 < len(regions) else len(lines)
        print('region %-10s line %6d  %5d lines' % (t, st + 1, end - st))
    by_len = sorted(((k - i + 1, n, r) for n, (i, k, r) in defs.items()), reverse=True)
    for ln, n, r in by_len[:10]:
        print('longest %4d %s (>>%s)' % (ln, n, r))
    for ln, n, r in [x for x in by_len if x[2] == 'public'][:5]:
        print('longest public %4d %s' % (ln, n))

sys.exit(1 if failed else 0)
EOF
