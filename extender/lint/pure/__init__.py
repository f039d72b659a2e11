"""Lint's pure part: manifests read (lines kept), the findings per container, a platforms file
read, the options. The no-I/O contract holds every module of this folder."""
