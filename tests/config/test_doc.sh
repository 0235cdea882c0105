#!/bin/bash
# tests/config/test_doc.sh — docs/config.md is exactly what `zbmd config-doc`
# generates from the schema table (regenerate with
# `build/bin/zbmd config-doc > docs/config.md` after changing config/schema.c).
source "$ZBMD_ROOT/tests/common/tap.sh"
ZBMD="$ZBMD_BUILD/bin/zbmd"
plan 3

"$ZBMD" config-doc >/tmp/zbmd-config-doc.$$ 2>&1
ok $? "zbmd config-doc runs"
if diff -u "$ZBMD_ROOT/docs/config.md" /tmp/zbmd-config-doc.$$ >/tmp/zbmd-config-doc-diff.$$; then
	ok 0 "docs/config.md matches zbmd config-doc"
else
	ok 1 "docs/config.md matches zbmd config-doc"
	head -20 /tmp/zbmd-config-doc-diff.$$ | sed 's/^/#   /'
fi
rm -f /tmp/zbmd-config-doc.$$ /tmp/zbmd-config-doc-diff.$$
"$ZBMD" config-doc extra >/dev/null 2>&1
[ $? -eq 2 ]; ok $? "zbmd config-doc with an argument: usage, exit 2"
done_testing
