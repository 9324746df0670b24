module modelserving.dev/plugin

go 1.24
