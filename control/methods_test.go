package control

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/service"
)

// serviceMethods returns the service's methods of the socket's shape
// (ctx, *Caller, params) (result, error), by name.
func serviceMethods(t *testing.T) map[string]reflect.Method {
	t.Helper()
	ctxType, callerType, errType := typeOf[context.Context](), typeOf[*service.Caller](), typeOf[error]()
	out := map[string]reflect.Method{}
	st := typeOf[*service.Service]()
	for i := range st.NumMethod() {
		m := st.Method(i)
		ft := m.Type // receiver first
		if ft.NumIn() == 4 && ft.In(1) == ctxType && ft.In(2) == callerType && ft.NumOut() == 2 && ft.Out(1) == errType {
			out[m.Name] = m
		}
	}
	require.NotEmpty(t, out)
	return out
}

func TestMethodTable_EveryServiceMethodReturnsItsConcreteResult(t *testing.T) {
	for name, m := range serviceMethods(t) {
		assert.NotEqual(t, reflect.Interface, m.Type.Out(0).Kind(),
			"service.%s returns %s: return the method's result type, which the table and rpc.discover take from it", name, m.Type.Out(0))
	}
}

func TestMethodTable_RowsDeclareTheServiceMethodsTypes(t *testing.T) {
	rows := map[[2]reflect.Type]bool{}
	for _, m := range methodTable() {
		rows[[2]reflect.Type{m.params, m.result}] = true
	}
	for name, m := range serviceMethods(t) {
		want := [2]reflect.Type{m.Type.In(3), resultType(m.Type.Out(0))}
		assert.True(t, rows[want], "no row of the method table declares service.%s's params %s and result %s", name, want[0], want[1])
	}
}

func TestMethodTable_AWithAfterResultDeclaresWhatItWraps(t *testing.T) {
	cases := []struct {
		name string
		in   reflect.Type
		want reflect.Type
	}{
		{"plain result", typeOf[EditResult](), typeOf[EditResult]()},
		{"empty", typeOf[Empty](), typeOf[Empty]()},
		{"after the response", typeOf[service.WithAfter[WatchResult]](), typeOf[WatchResult]()},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, resultType(c.in), c.name)
	}
}
