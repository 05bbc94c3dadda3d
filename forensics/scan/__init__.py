"""`forensics scan`: batch forensics over an archive of runs, resumable, Parquet out."""
