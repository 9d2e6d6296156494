package imagepull

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodelet/nodelet/internal/atomicfile"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Names of the kubelet's record directories and files.
const (
	recordsDir     = "image_manager"
	pullingDir     = "pulling"
	pulledDir      = "pulled"
	filePrefix     = "sha256-"
	tmpFileSuffix  = ".tmp"
	recordDirMode  = 0o700
	recordFileMode = 0o600
)

// FileRecords keeps pull intents and pulled records as files under <root-dir>/image_manager, in the
// kubelet's format: one JSON kubelet.config.k8s.io/v1beta1 object per file, named sha256-<hex> of the
// image (intents) or image reference (records), replaced atomically.
type FileRecords struct {
	pulling, pulled string
	encoder         apiruntime.Encoder
	decoder         apiruntime.Decoder
}

// NewFileRecords creates (if needed) the record directories under rootDir.
func NewFileRecords(rootDir string) (*FileRecords, error) {
	scheme := apiruntime.NewScheme()
	if err := kubeletconfigv1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme, serializer.EnableStrict)
	info, ok := apiruntime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), apiruntime.ContentTypeJSON)
	if !ok {
		return nil, errors.New("no JSON serializer for image pull records")
	}
	f := &FileRecords{
		pulling: filepath.Join(rootDir, recordsDir, pullingDir),
		pulled:  filepath.Join(rootDir, recordsDir, pulledDir),
		encoder: codecs.EncoderForVersion(info.Serializer, kubeletconfigv1beta1.SchemeGroupVersion),
		decoder: codecs.UniversalDeserializer(),
	}
	for _, d := range []string{f.pulling, f.pulled} {
		if err := os.MkdirAll(d, recordDirMode); err != nil {
			return nil, fmt.Errorf("create image pull records directory: %w", err)
		}
	}
	return f, nil
}

// WriteIntent records that image is about to be pulled.
func (f *FileRecords) WriteIntent(image string) error {
	return f.write(f.pulling, image, &kubeletconfigv1beta1.ImagePullIntent{Image: image})
}

// DeleteIntent removes image's pull intent; a missing one is not an error.
func (f *FileRecords) DeleteIntent(image string) error {
	return removeIfExists(filepath.Join(f.pulling, fileName(image)))
}

// IntentExists reports whether a pull intent for image is on disk.
func (f *FileRecords) IntentExists(image string) (bool, error) {
	intent := &kubeletconfigv1beta1.ImagePullIntent{}
	found, err := f.read(f.pulling, image, intent)
	return found && err == nil && intent.Image == image, err
}

// ListIntents returns the images of every readable pull intent.
func (f *FileRecords) ListIntents() ([]string, error) {
	var images []string
	err := f.each(f.pulling, func(data []byte) error {
		intent := &kubeletconfigv1beta1.ImagePullIntent{}
		if err := f.decode(data, intent); err != nil {
			return err
		}
		images = append(images, intent.Image)
		return nil
	})
	return images, err
}

// GetRecord returns the pulled record of imageRef. found is true when a file exists, even one that does
// not decode (then err says why).
func (f *FileRecords) GetRecord(imageRef string) (rec *kubeletconfigv1beta1.ImagePulledRecord, found bool, err error) {
	rec = &kubeletconfigv1beta1.ImagePulledRecord{}
	found, err = f.read(f.pulled, imageRef, rec)
	switch {
	case err != nil:
		return nil, found, err
	case !found || rec.ImageRef != imageRef:
		return nil, false, nil
	}
	return rec, true, nil
}

// WriteRecord writes rec under its image reference.
func (f *FileRecords) WriteRecord(rec *kubeletconfigv1beta1.ImagePulledRecord) error {
	return f.write(f.pulled, rec.ImageRef, rec)
}

// fileName is the kubelet's record file name for a key: sha256-<hex>.
func fileName(key string) string {
	return fmt.Sprintf("%s%x", filePrefix, sha256.Sum256([]byte(key)))
}

func (f *FileRecords) write(dir, key string, obj apiruntime.Object) error {
	var buf bytes.Buffer
	if err := f.encoder.Encode(obj, &buf); err != nil {
		return fmt.Errorf("encode image pull record: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, fileName(key)), buf.Bytes(), recordFileMode); err != nil {
		return fmt.Errorf("write image pull record: %w", err)
	}
	return nil
}

// read decodes the file of key into obj; found is false when there is no file.
func (f *FileRecords) read(dir, key string, obj apiruntime.Object) (found bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, fileName(key)))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read image pull record: %w", err)
	}
	return true, f.decode(data, obj)
}

func (f *FileRecords) decode(data []byte, into apiruntime.Object) error {
	if _, _, err := f.decoder.Decode(data, nil, into); err != nil {
		return fmt.Errorf("decode image pull record: %w", err)
	}
	return nil
}

// each calls fn with the content of every record file in dir (temporary files skipped); errors are
// joined and the walk goes on.
func (f *FileRecords) each(dir string, fn func([]byte) error) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list image pull records: %w", err)
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, filePrefix) || strings.HasSuffix(name, tmpFileSuffix) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			err = fn(data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
