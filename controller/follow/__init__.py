"""Following a file: the cursor (inode, dev, offset, fingerprints) and the log text -> typed records."""
