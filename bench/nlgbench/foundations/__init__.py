"""Foundations: what every layer may use and nothing nlgbench-specific depends on — one-line user
errors with did-you-mean (`errors`), the lazy typed `Registry` every registry is made of and the
YAML files that fill them (`lazyregistry`), atomic file writing and the one text-file reader
(`files`), every string of a JSON value changed (`jsonwalk`), number formatting (`fmt`), the
package's own paths (`package`), the version, the list of deferred third-party imports
(`deferred`), the names a spreadsheet would run as formulas (`spreadsheet`), and the one reader of
device names (`devicenames`). Imports no other layer.
"""
