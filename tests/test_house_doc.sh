#!/usr/bin/env bash
# tests/test_house_doc.sh - the header's two tables of contents and the user's manual stay
# true as zero.h changes:
#   doc_names_every_api         every ZERO_API function of the public section is named in
#                               the doc block (the comment before #ifndef ZERO_H_INCLUDED)
#   doc_toc_matches_sections    the doc block's TABLE OF CONTENTS lists its section headings,
#                               in order (and STEP BY STEP's numbered steps)
#   impl_contents_matches_tags  the implementation's table of contents (the comment after
#                               #define ZERO__IMPL_DEFINED) lists exactly the /* >>tag region
#                               headers, in order, each once
#   doc_no_internal_names       the doc block names no zero__ identifier and no >>tag
# One PASS/FAIL line per check; exit 1 on any failure. Run from the repository root
# (tests/run_tests.sh tests/test_house_doc.sh); ZERO_H=path checks another copy of zero.h.
set -u
H=${ZERO_H:-zero.h}
[ -f "$H" ] || { echo "FAIL setup: $H not found (run from the repository root)"; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP house_doc: python3 is not installed"; exit 0; }

python3 - "$H" <<'EOF'
import re, sys

path = sys.argv[1]
lines = open(path, encoding='utf-8', errors='replace').read().split('\n')
failed = False

def report(name, problems):
    global failed
    if problems:
        failed = True
        print('FAIL %s: %s' % (name, '; '.join(problems)))
    else:
        print('PASS %s' % name)

def find(pred, start=0, what='line'):
    for i in range(start, len(lines)):
        if pred(lines[i]):
            return i
    print('FAIL setup: no %s in %s' % (what, path))
    sys.exit(1)

doc_end = find(lambda l: l.startswith('#ifndef ZERO_H_INCLUDED'), what='#ifndef ZERO_H_INCLUDED')
doc = lines[:doc_end]
api_start = find(lambda l: l.startswith('#define ZERO_H_INCLUDED'), doc_end, '#define ZERO_H_INCLUDED')
api_end = find(lambda l: l.strip() == 'IMPLEMENTATION', api_start, 'IMPLEMENTATION banner')
impl_start = find(lambda l: l.startswith('#define ZERO__IMPL_DEFINED'), api_end,
                  '#define ZERO__IMPL_DEFINED')

def word_in(name, text):
    return re.search(r'(?<![A-Za-z0-9_])' + re.escape(name) + r'(?![A-Za-z0-9_])', text) is not None

# --- a. every public function is named in the doc block ---------------------------------
def public_functions():
    src = '\n'.join(lines[api_start:api_end])
    src = re.sub(r'/\*.*?\*/', ' ', src, flags=re.S)       # comments
    src = re.sub(r'//[^\n]*', ' ', src)
    src = re.sub(r'\\\n', ' ', src)                          # continued preprocessor lines
    src = '\n'.join(l for l in src.split('\n') if not l.lstrip().startswith('#'))
    names = []
    for m in re.finditer(r'\bZERO_API\b([^;{}()]*?)\b([A-Za-z_]\w*)\s*\(', src):
        if m.group(2) not in names:
            names.append(m.group(2))
    return names

api = public_functions()
doc_text = '\n'.join(doc)
problems = []
if len(api) < 10:
    problems.append('found only %d ZERO_API functions in the public section (parser broken?)' % len(api))
missing = [n for n in api if not word_in(n, doc_text)]
if missing:
    problems.append('%d of %d public functions not named in the doc block: %s'
                    % (len(missing), len(api), ' '.join(missing)))
report('doc_names_every_api', problems)

# --- b. the doc's table of contents matches its section headings -------------------------
TITLE = r'[A-Z][A-Z0-9+\-]*(?: [A-Z][A-Z0-9+\-]*)*'
problems = []
toc_at = next((i for i, l in enumerate(doc) if l.strip() == 'TABLE OF CONTENTS'), None)
if toc_at is None:
    report('doc_toc_matches_sections', ['no TABLE OF CONTENTS in the doc block'])
else:
    toc, toc_steps, elsewhere, in_steps, i = [], [], [], False, toc_at + 1
    while i < len(doc) and doc[i].strip():
        body = doc[i].strip()
        m = re.match(TITLE, body)
        rest = body[m.end():] if m else body
        if m:
            if 'at the end of the file' in rest:
                elsewhere.append(m.group(0))     # the licence: after the code, not a doc heading
            else:
                toc.append(m.group(0))
            in_steps = m.group(0) == 'STEP BY STEP'
        if in_steps:                             # "1 a communicator   2 the zero_desc ..."
            toc_steps += [int(n) for n in re.findall(r'(?:^|\s)(\d+)\s', rest)]
        i += 1
    heads, head_at = [], {}
    for j in range(i, len(doc)):
        m = re.match(r'^ {3}(' + TITLE + r')(?=\s|\(|$)', doc[j])
        if m:
            heads.append(m.group(1))
            head_at[m.group(1)] = j
    if toc != heads:
        only_toc = [t for t in toc if t not in heads]
        only_doc = [h for h in heads if h not in toc]
        if only_toc:
            problems.append('in the table of contents but no such heading: ' + ', '.join(only_toc))
        if only_doc:
            problems.append('headings missing from the table of contents: ' + ', '.join(only_doc))
        if not only_toc and not only_doc:
            problems.append('order differs: contents [%s], headings [%s]' % (', '.join(toc), ', '.join(heads)))
    for e in elsewhere:
        if e in heads:
            problems.append('%s is listed "at the end of the file" but is a heading of the doc block' % e)
    if 'STEP BY STEP' in head_at:
        j, steps = head_at['STEP BY STEP'] + 1, []
        while j < len(doc) and not re.match(r'^ {3}\S', doc[j]):
            m = re.match(r'^\s+--- (\d+)\.', doc[j])
            if m:
                steps.append(int(m.group(1)))
            j += 1
        if toc_steps and steps != toc_steps:
            problems.append('STEP BY STEP: the contents list steps %s, the section has %s' % (toc_steps, steps))
    report('doc_toc_matches_sections', problems)

# --- c. the implementation's table of contents matches its region headers ----------------
problems = []
j = impl_start + 1
while j < len(lines) and not lines[j].strip():
    j += 1
contents = []
if not lines[j].lstrip().startswith('/*'):
    problems.append('no comment right after #define ZERO__IMPL_DEFINED (line %d)' % (impl_start + 1))
else:
    while True:
        m = re.match(r'^\s+>>([A-Za-z0-9_]+)', lines[j])
        if m:
            contents.append(m.group(1))
        if '*/' in lines[j] or j + 1 >= len(lines):
            break
        j += 1
regions = [(m.group(1), k + 1) for k in range(j + 1, len(lines))
           for m in [re.match(r'^/\* >>([A-Za-z0-9_]+)', lines[k])] if m]
tags = [t for t, _ in regions]
if not contents:
    problems.append('the implementation\'s table of contents lists no >>tag')
for name, seq in (('table of contents', contents), ('region headers', tags)):
    dups = sorted(set(t for t in seq if seq.count(t) > 1))
    if dups:
        problems.append('%s: more than once: %s' % (name, ', '.join('>>' + t for t in dups)))
if contents and contents != tags:
    only_c = [t for t in contents if t not in tags]
    only_r = ['%s (line %d)' % (t, n) for t, n in regions if t not in contents]
    if only_c:
        problems.append('listed but no region: ' + ', '.join('>>' + t for t in only_c))
    if only_r:
        problems.append('regions not listed: ' + ', '.join('>>' + t for t in only_r))
    if not only_c and not only_r:
        problems.append('order differs: contents %s, regions %s' % (' '.join(contents), ' '.join(tags)))
report('impl_contents_matches_tags', problems)

# --- d. no internal names in the user's manual -------------------------------------------
problems = []
for k, l in enumerate(doc):
    bad = re.findall(r'\b[Zz][Ee][Rr][Oo]__\w*', l) + re.findall(r'>>[A-Za-z_]\w*', l)
    if bad:
        problems.append('line %d: %s' % (k + 1, ' '.join(bad)))
report('doc_no_internal_names', problems)

sys.exit(1 if failed else 0)
EOF
