module github.com/weir-dev/weir

go 1.26.8
