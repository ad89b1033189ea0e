#!/usr/bin/env bash
# tests/test_doc_code.sh - every C code block of README.md and every C example of zero.h's
# doc block compiles as C99 and as C++11 with -Wall -Wextra -Werror (gcc and g++; clang and
# clang++ too when installed), and the whole programs among them link and run (exit 0).
#
#   bash tests/test_doc_code.sh [README]     README: another copy of README.md (or README_MD=);
#                                            ZERO_H=path takes the doc block from another zero.h
#
# One line per block, language and compiler, named by file and line:
#   PASS readme_l258_c         README.md's block whose opening fence is line 258, gcc -std=c99
#   PASS readme_l258_cpp       the same block, g++ -std=c++11
#   PASS readme_l258_c_clang   clang -std=c99 (and _cpp_clang: clang++ -std=c++11)
#   PASS zero_h_l68_c          the doc block's example whose first line is zero.h line 68
# A compiler that is not installed is one SKIP line. Exit 1 on any failure.
#
# README.md, the convention. A fenced block whose info string is c, C or h is compiled as C
# and as C++ (the header is for both); cpp, c++, cxx, cc or hpp as C++ only; any other block
# (shell, output, no info string) is not code and is left alone. Each C block is one of:
#   - a whole program: it defines int main(. It is compiled as a file of its own, linked
#     (with the implementation object unless it defines ZERO_IMPLEMENTATION itself, as the
#     shortest complete program does) and run from a scratch directory: it must exit 0
#     within ZERO_DOC_RUN_TIMEOUT seconds (20);
#   - a fragment: the line right before its opening fence ends an HTML comment (invisible on
#     GitHub) that begins "<!-- fragment", optionally followed by ":" and the file-scope
#     declarations of the names the fragment uses but does not declare itself (your
#     context, your helpers and sizes: extern variables, prototypes, an enum of constants).
#     It may span several lines:
#         <!-- fragment: extern zero_ctx *ctx; -->
#         ```c
#     The fragment is compiled (not linked, not run) as the body of a function, after
#     <stdio.h>, <stdlib.h>, <string.h>, "zero.h" and those declarations. A line whose
#     text starts with "..." is elided code and is dropped (kept as a blank line, so the
#     compiler's line numbers stay the README's: every block is compiled under #line), and
#     since code left out (elided, or said in a comment) would use and set what a fragment
#     declares, fragments are compiled with -Wno-unused-variable
#     -Wno-unused-but-set-variable -Wno-uninitialized.
#   A C block that is neither (no main, no fragment comment) is a FAIL: mark it, or make it
#   a whole program, or give its fence no C info string if it is not meant to compile.
#
# zero.h's doc block (the comment before #ifndef ZERO_H_INCLUDED) has no fences: its examples
# are the runs of lines indented at least 2 columns deeper than the line before them, where
# that line ends with ":" or a blank line comes between (a run ends at a blank line or a
# line indented less than its first). A run is C when every line, its // comment removed,
# ends with ";", "{" or "}" or is a preprocessor line; the rest (tables, formulas, lists)
# is prose. A C run with "..." anywhere is a sketch: named on an info line, not compiled.
# The other C runs are compiled as C and C++:
#   - one of only preprocessor lines (DO THIS: the implementation's include) as a file of
#     its own (-c);
#   - the one listed below as "run" (THE SHORTEST COMPLETE PROGRAM) as the body of main,
#     linked with the implementation object and run;
#   - any other as a fragment, as above, with the declarations listed for it below.
# The list names each example by its section heading and a piece of its text; every entry
# must match exactly one C example (else FAIL zero_h_examples_table), so an example that
# moves or changes is noticed rather than silently dropped.
#
# Flags: gcc/clang -std=c99, g++/clang++ -std=c++11, -Wall -Wextra -Werror -pthread
# -I<root>, no feature-test macro (zero.h needs none); -O1 ($ZERO_DOC_OPT: the flow-based
# warnings), but -O0 for a file with the implementation in it (2-3 s a compiler instead of
# 5; tests/test_compile.sh compiles the implementation at -O2). C++ adds
# -Wno-missing-field-initializers: the docs write every desc as C's universal zero
# initializer, zero_desc d = {0}, which gcc and clang accept silently and g++ and clang++
# warn about under -Wextra (C++ alone would write {}; C99 has no form both take quietly).
# The implementation object is compiled once per compiler, from the doc block's DO THIS
# include when there is one (so that block's check is that compile), and identical sources
# are compiled once; ZERO_JOBS at a time (default: the cores). About 20 s on 2 cores.
# Sources, logs and binaries: build/doc_code/ (BUILD=...). Tests/run_tests.sh picks it up
# as a tests/test_*.sh; it needs nothing built by make.
set -u
README=${1:-${README_MD:-}}
H=${ZERO_H:-}
# (paths given relative to where it was started)
[ -z "$README" ] || README=$(realpath -m -- "$README")
[ -z "$H" ] || H=$(realpath -m -- "$H")
cd "$(dirname "$0")/.." || exit 1
README=${README:-README.md}
H=${H:-zero.h}
for f in "$README" "$H"; do
    [ -f "$f" ] || { echo "FAIL setup: $f not found"; exit 1; }
done
command -v python3 >/dev/null 2>&1 || { echo "SKIP doc_code: python3 is not installed"; exit 0; }
OUT=${BUILD:-build}/doc_code
rm -rf "$OUT"
mkdir -p "$OUT"
export ZERO_DOC_OUT=$OUT ZERO_DOC_README=$README ZERO_DOC_H=$H
export ZERO_DOC_JOBS=${ZERO_JOBS:-$(nproc 2>/dev/null || echo 2)}

python3 - <<'EOF'
import concurrent.futures as cf, hashlib, os, re, shutil, subprocess, sys, threading, time

# ---- the doc block's examples that need more than their own text ------------------------
# (section heading, a piece of the example's text, how: run | frag, file-scope declarations)
DOC_EXAMPLES = [
    ('THE SHORTEST COMPLETE PROGRAM', 'zero_create(&z, &d)', 'run', ''),
    ('STEP BY STEP', 'd.comm = comm;', 'frag', 'extern zero_comm *comm;'),
    ('STEP BY STEP', 'md.name = "block0"', 'frag', 'extern zero_ctx *z;'),
    ('STEP BY STEP', 'zero_add_tied_param(', 'frag',
     'extern zero_ctx *z; extern zero_module lnf; extern zero_param wte, head;'),
    ('STEP BY STEP', 'zero_add_param_stack(', 'frag', 'extern zero_ctx *z; enum { L = 12, C = 768 };'),
    ('STEP BY STEP', 'zero_save(z, "ckpt")', 'frag', 'extern zero_ctx *z;'),
    ('ON ACTIVATIONS', 'zero_act_add(', 'frag', 'extern zero_ctx *z; extern int64_t bytes;'),
    ('ON CHECKPOINTS', 'int64_t next_batch', 'frag', 'extern zero_ctx *z;'),
]

t_start = time.time()
ROOT = os.getcwd()
OUT = os.environ['ZERO_DOC_OUT']
README = os.environ['ZERO_DOC_README']
H = os.environ['ZERO_DOC_H']
JOBS = max(1, int(os.environ.get('ZERO_DOC_JOBS', '2') or 2))
OPT = os.environ.get('ZERO_DOC_OPT', '-O1').split()
RUN_TIMEOUT = float(os.environ.get('ZERO_DOC_RUN_TIMEOUT', '20'))
HEADERS = '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include "zero.h"\n'
# a fragment's declarations are used and set by code it leaves out
FRAG_FLAGS = ['-Wno-unused-variable', '-Wno-unused-but-set-variable', '-Wno-uninitialized']
# C's universal zero initializer {0}, which the docs use for every desc: g++ and clang++
# warn about it under -Wextra (gcc and clang do not); C++ alone would write {}
CXX_FLAGS = ['-Wno-missing-field-initializers']
IMPL_OPT = ['-O0']
IMPL_SRC = '#define ZERO_IMPLEMENTATION\n#include "zero.h"\n'

# compilers: (suffix of the test name, language, command, standard)
COMPILERS = [('c', 'c', 'gcc', '-std=c99'), ('cpp', 'cpp', 'g++', '-std=c++11'),
             ('c_clang', 'c', 'clang', '-std=c99'), ('cpp_clang', 'cpp', 'clang++', '-std=c++11')]
have = {cc: shutil.which(cc) is not None for _, _, cc, _ in COMPILERS}
out_lines = []          # (sort key, line) printed at the end in block order
setup_fail = []

def has_impl(text):
    return re.search(r'^\s*#\s*define\s+ZERO_IMPLEMENTATION\b', text, re.M) is not None

def has_main(text):
    return re.search(r'\bint\s+main\s*\(', text) is not None

def quoted(path):
    return path.replace('\\', '\\\\').replace('"', '\\"')

# ---- README.md's fenced blocks -----------------------------------------------------------
# block: dict(name, file, line, langs, kind: program|frag|tu|bad, text, decls, decl_line, why)
blocks = []
notes = []
rl = open(README, encoding='utf-8', errors='replace').read().split('\n')
i = 0
while i < len(rl):
    m = re.match(r'^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)', rl[i])
    if not m:
        i += 1
        continue
    indent, fence, info = len(m.group(1)), m.group(2), m.group(3).lower()
    j = i + 1
    while j < len(rl) and not re.match(r'^ {0,3}' + re.escape(fence[0]) + '{%d,}\s*$' % len(fence), rl[j]):
        j += 1
    body = [l[indent:] if l[:indent].strip() == '' else l.lstrip() for l in rl[i + 1:j]]
    start = i
    i = j + 1
    if info in ('c', 'h'):
        langs = ['c', 'cpp']
    elif info in ('cpp', 'c++', 'cxx', 'cc', 'hpp'):
        langs = ['cpp']
    else:
        continue
    text = '\n'.join(body) + '\n'
    b = dict(name='readme_l%d' % (start + 1), file=README, line=start + 2, langs=langs,
             text=text, decls='', decl_line=0, why='')
    # a fragment comment ending on the line before the fence
    k = start - 1
    comment = None
    if k >= 0 and rl[k].rstrip().endswith('-->'):
        while k >= 0 and '<!--' not in rl[k]:
            k -= 1
        if k >= 0:
            comment = '\n'.join(rl[k:start])
            comment = comment[comment.index('<!--') + 4:comment.rindex('-->')]
    cm = re.match(r'\s*fragment\b\s*(:?)(.*)$', comment or '', re.S)
    if comment is not None and cm:
        b['kind'] = 'frag'
        b['decls'] = cm.group(2) if cm.group(1) else ''
        b['decl_line'] = k + 1
    elif has_main(text):
        b['kind'] = 'program'
    else:
        b['kind'] = 'bad'
        b['why'] = ('a C block with no main() and no "<!-- fragment ... -->" comment on the line '
                    'before its fence (see the top of tests/test_doc_code.sh)')
    blocks.append(b)
n_readme = len(blocks)
if n_readme == 0:
    setup_fail.append('no C code block in %s (parser broken?)' % README)

# ---- zero.h's doc block -------------------------------------------------------------------
hl = open(H, encoding='utf-8', errors='replace').read().split('\n')
doc_end = next((n for n, l in enumerate(hl) if l.startswith('#ifndef ZERO_H_INCLUDED')), None)
if doc_end is None:
    setup_fail.append('no #ifndef ZERO_H_INCLUDED in %s' % H)
    doc_end = 0
doc = hl[:doc_end]
if doc:
    doc[0] = re.sub(r'^/\*', '  ', doc[0])

def ind(l):
    return len(l) - len(l.lstrip(' '))

def is_c(run):
    seen = False
    for l in run:
        s = re.sub(r'//.*', '', re.sub(r'/\*.*?\*/', '', l)).strip()
        if not s:
            continue
        seen = True
        if not (s.startswith('#') or s.endswith((';', '{', '}'))):
            return False
    return seen

section = ''
doc_runs = []           # (line index, section, lines)
i = 0
while i < len(doc):
    l = doc[i]
    if re.match(r'^ {3}[A-Z][A-Z0-9+\- ]*[A-Z0-9+]( |\(|$)', l):
        section = re.match(r'^ {3}([A-Z][A-Z0-9+\- ]*[A-Z0-9+])', l).group(1)
    if not l.strip():
        i += 1
        continue
    j = i - 1
    while j >= 0 and not doc[j].strip():
        j -= 1
    if j >= 0 and ind(l) >= ind(doc[j]) + 2 and (doc[j].rstrip().endswith(':') or j < i - 1):
        k = i
        while k < len(doc) and doc[k].strip() and ind(doc[k]) >= ind(l):
            k += 1
        run = doc[i:k]
        if is_c(run):
            doc_runs.append((i, section, run))
            i = k
            continue
    i += 1

table_hits = [[] for _ in DOC_EXAMPLES]
for at, sec, run in doc_runs:
    strip = min(ind(l) for l in run if l.strip())
    text = '\n'.join(l[strip:] for l in run) + '\n'
    name = 'zero_h_l%d' % (at + 1)
    if '...' in text:
        notes.append('%s (%s): a sketch ("..."), not compiled: %s' % (name, sec, run[0].strip()[:60]))
        continue
    b = dict(name=name, file=H, line=at + 1, langs=['c', 'cpp'], text=text, decls='',
             decl_line=0, why='')
    entry = None
    for n, (esec, piece, how, decls) in enumerate(DOC_EXAMPLES):
        if esec == sec and piece in text:
            table_hits[n].append(name)
            entry = entry or (how, decls)
    code = [l for l in text.split('\n') if l.strip()]
    if all(l.lstrip().startswith('#') for l in code):
        b['kind'] = 'tu'
    elif entry:
        b['kind'], b['decls'] = entry
    else:
        b['kind'] = 'frag'
    blocks.append(b)
for n, hits in enumerate(table_hits):
    if len(hits) != 1:
        setup_fail.append('zero_h_examples_table: the entry (%r, %r) matches %s' % (
            DOC_EXAMPLES[n][0], DOC_EXAMPLES[n][1],
            'no C example of the doc block' if not hits else 'several: ' + ', '.join(hits)))
if doc and not any(b['file'] == H for b in blocks):
    setup_fail.append('no C example found in the doc block of %s (parser broken?)' % H)

# ---- translation units --------------------------------------------------------------------
def tu_source(b):
    f = quoted(b['file'])
    body = '\n'.join('' if l.lstrip().startswith('...') else l for l in b['text'].split('\n'))
    if b['kind'] in ('program', 'tu'):
        return '#line %d "%s"\n%s' % (b['line'], f, body)
    pre = HEADERS
    if b['decls'].strip():
        if b['decl_line']:
            pre += '#line %d "%s"\n' % (b['decl_line'], f)
        pre += b['decls'].strip() + '\n'
    if b['kind'] == 'run':
        return pre + 'int main(void) {\n#line %d "%s"\n%s    return 0;\n}\n' % (b['line'], f, body)
    return (pre + 'void zero_doc_fragment(void);\nvoid zero_doc_fragment(void) {\n'
            '#line %d "%s"\n%s}\n' % (b['line'], f, body))

SEM = threading.Semaphore(JOBS)     # JOBS compilers, linkers or programs at a time

def run_cmd(cmd, log, timeout=None, cwd=None):
    try:
        with SEM:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                               timeout=timeout)
        out, rc = p.stdout.decode('utf-8', 'replace'), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b'').decode('utf-8', 'replace') + '\n(timed out)', 124
    with open(log, 'a') as f:
        f.write('$ ' + ' '.join(cmd) + '\n' + out + '\n')
    return rc, out

def first_diag(out):
    ls = out.split('\n')
    for pat in (r'\b(error|warning):', r'error|warning|signal'):
        for l in ls:
            if re.search(pat, l):
                return l.strip()[:300]
    return out.strip().split('\n')[-1][:300] if out.strip() else ''

# compiles in one pool, the checks (which wait for them) in another: no deadlock
pool = cf.ThreadPoolExecutor(max_workers=64)
checks = cf.ThreadPoolExecutor(max_workers=64)
lock = threading.Lock()
compiled = {}           # (compiler, sha, extra flags) -> future of (ok, obj, diagnostic)

def flags(std, lang, src):
    return ([std] + (IMPL_OPT if has_impl(src) else OPT) + ['-Wall', '-Wextra', '-Werror', '-pthread',
            '-I' + ROOT] + (CXX_FLAGS if lang == 'cpp' else []))

def compile_once(cc, std, lang, src, extra):
    key = (cc, hashlib.sha1(src.encode()).hexdigest()[:16], tuple(extra))
    with lock:
        if key not in compiled:
            base = os.path.join(OUT, '%s_%s' % (key[1], cc.replace('+', 'x')))
            path = base + ('.c' if lang == 'c' else '.cpp')
            with open(path, 'w') as f:
                f.write(src)
            def job():
                rc, out = run_cmd([cc] + flags(std, lang, src) + extra + ['-c', '-o', base + '.o', path],
                                  base + '.log')
                return (rc == 0, base + '.o', '' if rc == 0 else
                        '%s (%s.log): %s' % (' '.join([cc] + flags(std, lang, src)[:2]), base,
                                             first_diag(out)))
            compiled[key] = pool.submit(job)
        return compiled[key]

# the implementation object: the doc block's DO THIS include itself when it is there
impl_src = IMPL_SRC
for b in blocks:
    if b['file'] == H and b['kind'] == 'tu' and has_impl(b['text']):
        impl_src = tu_source(b)
        break
impl = {}
for suffix, lang, cc, std in COMPILERS:
    if have[cc] and blocks:
        impl[cc] = compile_once(cc, std, lang, impl_src, [])

def check(b, suffix, lang, cc, std):
    name = '%s_%s' % (b['name'], suffix)
    if b['kind'] == 'bad':
        return 'FAIL %s: %s:%d: %s' % (name, b['file'], b['line'] - 1, b['why'])
    src = tu_source(b)
    extra = FRAG_FLAGS if b['kind'] == 'frag' else []
    ok, obj, diag = compile_once(cc, std, lang, src, extra).result()
    if not ok:
        return 'FAIL %s: %s' % (name, diag)
    if b['kind'] not in ('program', 'run'):
        return 'PASS %s' % name
    objs = [obj]
    if not has_impl(src):
        iok, iobj, idiag = impl[cc].result()
        if not iok:
            return 'FAIL %s: the implementation object did not compile: %s' % (name, idiag)
        objs.append(iobj)
    rundir = os.path.join(OUT, name)
    os.makedirs(rundir, exist_ok=True)
    exe = os.path.join(rundir, name)
    log = os.path.join(OUT, name + '.log')
    rc, out = run_cmd([cc, '-pthread', '-o', exe] + objs + ['-lm'], log)
    if rc != 0:
        return 'FAIL %s: link failed (%s): %s' % (name, log, first_diag(out))
    rc, out = run_cmd([os.path.abspath(exe)], log, timeout=RUN_TIMEOUT, cwd=rundir)
    if rc != 0:
        what = ('timed out after %gs' % RUN_TIMEOUT if rc == 124 else
                'was killed by signal %d' % -rc if rc < 0 else 'exited %d' % rc)
        return 'FAIL %s: the program %s (%s): %s' % (name, what, log, out.strip()[-300:])
    return 'PASS %s' % name

futures = []
for b in blocks:
    for suffix, lang, cc, std in COMPILERS:
        if lang in b['langs'] and have[cc]:
            futures.append(checks.submit(check, b, suffix, lang, cc, std))
lines = [f.result() for f in futures]
checks.shutdown()
pool.shutdown()

for n in notes:
    print('note: ' + n)
for cc in ('clang', 'clang++'):
    if not have[cc]:
        lines.append('SKIP doc_code_%s: %s not installed' % (cc.replace('+', 'x'), cc))
for s in setup_fail:
    lines.append('FAIL ' + s if s.startswith('zero_h_examples_table') else 'FAIL setup: ' + s)
for l in lines:
    print(l)
nb = len(blocks)
print('test_doc_code: %d blocks (%d from %s, %d from %s\'s doc block), %d checks, %.1f s' % (
    nb, n_readme, README, nb - n_readme, H, len(lines), time.time() - t_start))
sys.exit(1 if any(l.startswith('FAIL') for l in lines) else 0)
EOF
