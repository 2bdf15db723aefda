"""The storage layer: the LMDB environment, the catalog, the record log and its codecs.

Every ``lmdb.Error`` becomes an ``AckStoreError`` here (``lmdb_errors``)."""
