package format

// appendTime appends Unix nanoseconds ns as RFC 3339 UTC with nine
// fractional digits ("2006-01-02T15:04:05.000000000Z"), the JSON record's
// time format. It is time.AppendFormat's result for that layout, computed
// directly (days → civil date) because the general formatter dominated the
// cost of a record. Years outside 0000–9999 fall back to the general path.
func appendTime(b []byte, ns int64) []byte {
	secs := ns / 1e9
	frac := ns % 1e9
	if frac < 0 {
		secs--
		frac += 1e9
	}
	days := secs / 86400
	sod := secs % 86400
	if sod < 0 {
		days--
		sod += 86400
	}
	y, m, d := civil(days)
	if y < 0 || y > 9999 {
		return appendTimeSlow(b, ns)
	}
	b = append(b,
		byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+m/10), byte('0'+m%10), '-',
		byte('0'+d/10), byte('0'+d%10), 'T',
		byte('0'+sod/36000), byte('0'+sod/3600%10), ':',
		byte('0'+sod%3600/600), byte('0'+sod%3600/60%10), ':',
		byte('0'+sod%60/10), byte('0'+sod%10), '.')
	var f [9]byte
	for i := 8; i >= 0; i-- {
		f[i] = byte('0' + frac%10)
		frac /= 10
	}
	b = append(b, f[:]...)
	return append(b, 'Z')
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's days_from_civil inverse: 400-year eras, March-based years).
func civil(days int64) (y, m, d int64) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097                                  // day of era [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // year of era [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // day of year, from March 1 [0, 365]
	mp := (5*doy + 2) / 153                                // month from March [0, 11]
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	y = yoe + era*400
	if m <= 2 {
		y++
	}
	return y, m, d
}

// AppendTime appends Unix nanoseconds ns as the JSON record's time
// (RFC 3339 UTC, nine fractional digits), for other record formats.
func AppendTime(b []byte, ns int64) []byte { return appendTime(b, ns) }
