"""The ``ragcsv`` kind: graded answer accuracy on RAGCSV rows."""
