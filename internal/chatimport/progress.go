package chatimport

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress draws a one-line bar on a terminal: the bytes read of the
// export's total, the conversations done and refused, their rate and the
// time left at it, at most ten times a second. With no writer it draws
// nothing.
type progress struct {
	w              io.Writer
	total, read    int64
	convs, refused int
	start, drawn   time.Time
}

func newProgress(w io.Writer, files []text) *progress {
	p := &progress{w: w, start: time.Now()}
	for _, f := range files {
		p.total += f.size
	}
	return p
}

// reader counts what is read through r.
func (p *progress) reader(r io.Reader) io.Reader { return &counting{r, p} }

type counting struct {
	r io.Reader
	p *progress
}

func (c *counting) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.read += int64(n)
	return n, err
}

// done records how many conversations are done and refused so far, and
// redraws if it is time.
func (p *progress) done(conversations, refused int) {
	p.convs, p.refused = conversations, refused
	if p.w != nil && time.Since(p.drawn) >= 100*time.Millisecond {
		p.draw()
	}
}

// finish draws the last state and ends the line.
func (p *progress) finish() {
	if p.w != nil {
		p.draw()
		fmt.Fprintln(p.w)
	}
}

func (p *progress) draw() {
	p.drawn = time.Now()
	frac := 1.0
	if p.total > 0 {
		frac = min(float64(p.read)/float64(p.total), 1)
	}
	const width = 30
	full := int(frac * width)
	line := fmt.Sprintf("\r[%s%s] %3.0f%%  %.1f of %.1f MB  %d done, %d refused",
		strings.Repeat("=", full), strings.Repeat(" ", width-full), frac*100,
		float64(p.read)/1e6, float64(p.total)/1e6, p.convs, p.refused)
	if secs := time.Since(p.start).Seconds(); secs >= 1 {
		line += fmt.Sprintf("  %.0f/s", float64(p.convs+p.refused)/secs)
		if frac > 0 && frac < 1 {
			line += fmt.Sprintf("  %s left", (time.Duration(secs*(1-frac)/frac) * time.Second).Round(time.Second))
		}
	}
	fmt.Fprint(p.w, line+"\x1b[K") // clear what a longer line left
}
