// The FLAC plugin; see FLACPlugin.swift.
